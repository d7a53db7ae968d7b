"""Error reports that span lines, read the way their writers meant them: which line holds the message.

- **The C++ runtime's abort**: "terminate called after throwing an instance of 'X'" only names the
  exception's type; its message is the `what():` line after it (`introduces` in
  `engine/data/severity.yaml` `roles`). The message may go on in the lines right after it that carry no
  header of their own (`continued`: MXNet's `what():  … cudaMalloc fail` wrapped by a paste before
  "ed: out of memory"); those lines are its body and the message weighs at least what they do.
  An abort whose message is in sight nowhere after it, in a file that logged a severe error before it,
  threw that error: it weighs no more than a root cause needs (a `DistBackendError` abort after the
  rank's watchdog timeout ranks below it, and still points at its node).
- **Return traces** (`return_frame`: NCCL's `init.cc:128 -> 3`, one line per function the error code
  passed through): a stack whose message is the line right before its first frame, innermost first.
  The first stack a file shows holds the cause; a stack that a file shows only after its first one
  started (NCCL's "Cuda failure" once the communicator was torn down after an IB completion error)
  is that failure's consequence. The frames are context, not events.
- **Hard-wrapped sentences** (`wrapped`): help text printed at a fixed width (Open MPI's "This is
  usually due to either a failure of the TCP network / connection to the node, or possibly an internal
  failure of / the daemon itself."): a line with no level of its own that goes on with a plain
  lower-case word, right after a line that stopped mid-sentence (on a letter or a comma), is the rest
  of that sentence. The sentence is one event, shown whole, weighing what its worst line does.

Only the lines' places in their files and the phrases of the data file are read (`ParsedJob.positions`
keeps each event's first and last line per file; those are the lines compared).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from engine.model import ParsedJob
from engine.rules import load

BODY_LINES = 3  # lines after a message that may continue it
THROWN_SEVERITY = 0.6  # an abort with no what() line, after an error of its file, weighs at most this
HEAD_MIN_SEVERITY = 0.5  # a stack's message is an alarming line (NCCL's INFO lines around it are not)
# a Python or C++ stack frame, or a traceback's header (roles.py reads lines with these too)
FRAME = re.compile(r"\s*(?:File \"|frame #|Traceback \(most recent call last\))")
ERROR_LINE = re.compile(r"^[\w.]*(?:Error|Exception)\b")  # a line that opens with an exception's name
# a line that was wrapped reached its width: shorter lines ended where their writer ended them ("Python
# runtime state: finalizing" before an unrelated "terminate called without an active exception")
WRAP_WIDTH = 45
# a line that stops mid-sentence: its last token is a plain word (a path, a key's value or a number that ends
# a line ends a record, not a sentence: "[INFO:swift] images_dir: /runs/v0/images")
MID_SENTENCE = re.compile(r"(?:^|\s)[A-Za-z][a-z]*,?$")
GOES_ON = re.compile(r"^[a-z]+(?:[ ,]|$)")  # goes on with a plain lower-case word ("ssh:" does not)


@dataclass
class Reading:
    context: set[int] = field(default_factory=set)  # lines that only carry another line's message
    carried: dict[int, list[int]] = field(default_factory=dict)  # message -> lines it takes its weight from
    introduced: dict[int, list[int]] = field(default_factory=dict)  # message -> the lines naming it before it
    causes: set[int] = field(default_factory=set)  # the first stack's message in some file
    later: set[int] = field(default_factory=set)  # messages of stacks shown only after a first one
    threw: set[int] = field(default_factory=set)  # aborts with no message, after an error of their file
    continues: dict[int, list[int]] = field(default_factory=dict)  # wrapped sentence's head -> rest, in order


@lru_cache(maxsize=16)
def roles_rx(key: str) -> re.Pattern[str]:
    """severity.yaml `roles.<key>`, its patterns as one regex (one that matches nothing where it has none)."""
    return re.compile("|".join(f"(?:{p})" for p in load("severity")["roles"].get(key) or []) or "(?!)")


def read_stacks(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str],
                levels_of: dict[int, str | None], severity: dict[int, float],
                indents: dict[int, int] | None = None) -> Reading:
    """The stacks and abort reports among the candidates (`msgs`: their header-stripped messages, `indents`:
    the blanks before each message in its line, as engine.roles reads them; none known: none)."""
    intro, continued = roles_rx("introduces"), roles_rx("continued")
    frame, header = roles_rx("return_frame"), roles_rx("stack_header")
    out = Reading()
    intros = {i for i in candidates if intro.search(msgs[i])}
    frames = {i for i in candidates if frame.search(msgs[i])}
    messages = {i for i in candidates if continued.search(msgs[i])}
    _wrapped(parsed, candidates, msgs, levels_of, indents or {}, out)
    if not (intros or frames or messages):
        return out
    out.context |= frames
    pool = set(candidates)
    firsts: dict[str, int] = {}
    unsaid: list[int] = []  # abort reports whose message is not in sight (in some file)
    for path, pos in parsed.positions.items():
        at = {first: i for i, (first, _) in pos.items()}
        at_any = {**{last: i for i, (_, last) in pos.items()}, **at}
        for i in intros & pos.keys():
            line = pos[i][0] + 1
            nxt = at_any.get(line)
            if nxt is not None and nxt in pool and header.search(msgs[nxt]):
                out.context.add(nxt)  # the stack's header says where; the message is the line after it
                line += 1
                nxt = at_any.get(line)
            if nxt is not None and nxt in pool and nxt not in intros:
                messages.add(nxt)
                out.carried.setdefault(nxt, []).append(i)
                if i not in out.introduced.setdefault(nxt, []):
                    out.introduced[nxt].append(i)
                out.context.add(i)  # the type only: its message is the next line
            elif any(pos[m][1] > pos[i][0] for m in messages & pos.keys()):
                out.context.add(i)  # ranks interleaved in one file: a message line of its kind follows
            else:
                unsaid.append(i)
        for m in messages & pos.keys():
            _body(parsed, m, pos[m][0], at, pool, msgs, levels_of, out, intro, continued, frame)
        heads = [(line, i) for i, lines in pos.items() if i in pool and i not in frames
                 and severity.get(i, 0.0) >= HEAD_MIN_SEVERITY
                 for line in sorted(set(lines)) if at_any.get(line + 1) in frames]
        if heads:
            start, cause = min(heads)
            firsts[path] = start
            out.causes.add(cause)
    for i in set(unsaid) - out.context:
        if all(any(j != i and j not in intros and severity.get(j, 0.0) >= THROWN_SEVERITY
                   and pos[j][0] < pos[i][0] for j in pos.keys() & pool)
               for pos in parsed.positions.values() if i in pos):
            out.threw.add(i)  # it threw what its file logged before it: it says no more than that
    for i in pool - frames - out.causes:
        where = [(path, pos[i][0]) for path, pos in parsed.positions.items() if i in pos]
        if where and all(path in firsts and first > firsts[path] for path, first in where) \
                and severity.get(i, 0.0) >= HEAD_MIN_SEVERITY and i not in out.context:
            out.later.add(i)
    return out


def _wrapped(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str],
             levels_of: dict[int, str | None], indents: dict[int, int], out: Reading) -> None:
    """The candidates that are the rest of a hard-wrapped sentence begun on the candidate line before them,
    in every file that shows them (`wrapped` in the module's doc): context, carried by the sentence's
    first line, and listed with it in their order in the first file that shows them (`continues`)."""
    prose = {i for i in candidates if _prose(msgs[i], indents.get(i, 0))}
    goes_on = {i for i in prose if levels_of.get(i) is None and GOES_ON.match(msgs[i]) and "=" not in msgs[i]}
    if not goes_on:
        return
    heads: dict[int, set[int]] = {}  # continuation -> the first line of its sentence, per file
    first_at: dict[int, int] = {}  # continuation -> its line in the first file that shows it
    for pos in parsed.positions.values():
        at = {first: i for i, (first, _) in pos.items()}
        at_any = {**{last: i for i, (_, last) in pos.items()}, **at}
        for i in goes_on & pos.keys():
            line, head = pos[i][0], None
            first_at.setdefault(i, line)
            while True:
                before = at_any.get(line - 1)
                if before is None or before not in prose or before == i \
                        or not MID_SENTENCE.search(msgs[before].rstrip()) or len(msgs[before]) < WRAP_WIDTH:
                    break
                head, line = before, line - 1
                if before not in goes_on:
                    break
            heads.setdefault(i, set()).add(head if head is not None else -1)
    for i in sorted(heads, key=first_at.__getitem__):
        found = heads[i]
        if len(found) != 1 or -1 in found:
            continue  # not the rest of one sentence everywhere it stands
        (head,) = found
        if parsed.templates[i].count > parsed.templates[head].count:
            continue
        out.context.add(i)
        out.carried.setdefault(head, []).append(i)
        out.continues.setdefault(head, []).append(i)


def _prose(msg: str, indent: int) -> bool:
    """Whether a message reads as a line of prose: three words or more, not a frame, not indented (the
    code line under a frame goes on with a lower-case word too)."""
    return len(msg.split()) >= 3 and not FRAME.match(msg) and indent == 0


def _body(parsed: ParsedJob, m: int, line: int, at: dict[int, int], pool: set[int], msgs: dict[int, str],
          levels_of: dict[int, str | None], out: Reading, *stops: re.Pattern[str]) -> None:
    """The lines right after message `m` (at `line`) that continue it: no header of their own, no frame,
    no exception of their own, and logged no more often than the message itself."""
    count = parsed.templates[m].count
    for k in range(1, BODY_LINES + 1):
        i = at.get(line + k)
        if i is None or i not in pool or i == m:
            return
        msg = msgs.get(i, "")
        if (not msg.strip() or levels_of.get(i) is not None or FRAME.match(msg) or ERROR_LINE.match(msg)
                or any(rx.search(msg) for rx in stops) or parsed.templates[i].count > count):
            return
        out.context.add(i)
        out.carried.setdefault(m, []).append(i)
