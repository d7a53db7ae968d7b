"""The role of an event in a failure: the line that started it, or one of its echoes.

Echoes rank below the line they echo (see `engine.events`):
- `cascade`: consequences on other ranks (watchdog timeouts, a peer's closed connection); those
  that say the other side went away (`disconnect`: "Connection closed by peer", "Broken pipe")
  come after the first sign of the failure wherever it is, so they rank below any other;
- `consequence`: the launcher's summaries of a failure (torchrun's "Sending process … closing
  signal SIGTERM", `ChildFailedError`, the "Root Cause (first observed failure)" block's fields);
- `report`: the launcher's report of which rank died and how ("failed (exitcode: -9) local_rank: 2"),
  the best evidence when the rank itself left none, an echo otherwise;
- `wrapper`: a generic error that wraps another (`DistBackendError: NCCL error …`, "See inner
  exception"), found by the lexicon and by *quoting*: an event whose line contains the message of
  another event (the error it caught) is that error's wrapper;
- `context`: traceback code lines (indented source under a frame) and label lines ("Last error:")
  whose content is the line after them; that line inherits the label's severity.

A Python exception chained to another ("The above exception was the direct cause of the following
exception:") started with the line just before that marker, the first exception's last line: it
weighs at least as much as an exception line does, whatever its words (a paste may glue it to a
code line: "raise ValueError(ValueError: Not able to read records …"). So does the line right after a
traceback's last code line, its exception, whatever its type is called
("jinja2.exceptions.TemplateNotFound: chat.j2", "KeyboardInterrupt").

*Teardown* is found in the job: once a file shows the launcher's (or the program's) reaction to a
failure — the first line of a summary or report ("Sending process … closing signal", "failed
(exitcode: 1)", "received signal 15 (SIGTERM)") — whatever that file logs later was caused by the
teardown. An event whose first line comes after that point in *every* file that holds it (the
rendezvous store's "failed to shutdown", a peer's "Broken pipe" while the agents exit) is a
cascade of the teardown (`late`), however few nodes log it.

Phrases are data (`engine/data/severity.yaml`, `roles`); quoting and labels are found in the job.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache

from engine.decoration import Decoration
from engine.errstacks import ERROR_LINE, FRAME, THROWN_SEVERITY, read_stacks, roles_rx
from engine.headers import parse_header
from engine.launcher import first_failures
from engine.masking import MASK
from engine.model import ParsedJob
from engine.rules import load
from engine.window import Window, read_window, read_windows_before

CASCADE, CONSEQUENCE, REPORT, WRAPPER, CONTEXT = "cascade", "consequence", "report", "wrapper", "context"
QUOTE_MIN_CHARS = 20  # a quoted message shorter than this could be anything
QUOTE_CANDIDATES = 80  # the most severe candidates compared pairwise
QUOTE_MIN_SEVERITY = 0.5
CHAIN_LOOKBACK = 4  # lines before a chain marker searched for the first exception's last line
QUOTE_MIN_WORDS = 4  # a wrapper adds words of its own (a bare "NCCL WARN" prefix does not make one)
CODE_INDENT = 4  # traceback code lines are indented at least this much (frame lines by 2)
PASTE_TEMPLATES = 2  # a failed job of at most this many templates with words is a chosen excerpt
PASTE_SEVERITY = 0.5  # ... whose lines weigh at least this when none of them is alarming
_EXC_TYPE = re.compile(r"^(?:[\w.]*(?:Error|Exception|Warning|Interrupt|Failure)\w*|[\w.]+Error\w*):\s*")
_WORD = re.compile(r"[A-Za-z]{3,}")
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
_EMPTY_EXC = re.compile(r"^[\w.]*(?:Error|Exception)\w*:\s*$")  # an exception whose message follows it
TRACEBACK_LINES = 200  # lines after a traceback's head searched for its exception
EMPTY_EXC_LINES = 60  # lines after an exception without a message searched for the one it reports


@dataclass
class Roles:
    role: dict[int, str] = field(default_factory=dict)  # event id -> role (absent: a possible root cause)
    inherited: dict[int, float] = field(default_factory=dict)  # severity given by a label line before it
    capped: dict[int, float] = field(default_factory=dict)  # severity at most (a quoter: what it quotes)
    evidence: dict[int, list[str]] = field(default_factory=dict)  # raw lines to show first
    evidence_nodes: dict[int, set[str]] = field(default_factory=dict)  # the nodes those lines are from
    killed_nodes: set[str] = field(default_factory=set)  # nodes of ranks killed first (launcher blocks)
    late: set[int] = field(default_factory=set)  # events first logged after their files' teardown began
    disconnects: set[int] = field(default_factory=set)  # cascades, wrappers saying the other side went away
    blocks: int = 0  # launcher blocks of first observed failures read
    wrapped: set[int] = field(default_factory=set)  # the rest of hard-wrapped sentences (context, not code)
    # events that rank as the restatement after them (`_restated`): no role, whatever a signature says
    restated: set[int] = field(default_factory=set)


@lru_cache(maxsize=1)
def _lexicon() -> tuple[list[tuple[str, re.Pattern[str]]], re.Pattern[str]]:
    data = load("severity")
    roles = data["roles"]
    out = [(role, re.compile("|".join(f"(?:{p})" for p in roles[role])))
           for role in (REPORT, CONSEQUENCE, WRAPPER) if roles.get(role)]
    out.append((CASCADE, re.compile("|".join(f"(?:{p})" for p in data["cascade"]))))
    return out, re.compile(roles["label"])


def lexicon_role(template: str) -> str | None:
    """The role the lexicon gives a template (report, consequence, wrapper, cascade), if any."""
    for role, rx in _lexicon()[0]:
        if rx.search(template):
            return role
    return None


def _message_and_indent(raw: str, decoration: Decoration | None = None) -> tuple[str, int]:
    msg = parse_header(raw, decoration=decoration).message
    at = raw.find(msg) if msg else -1
    indent = 0
    while at - indent - 1 >= 0 and raw[at - indent - 1] == " ":
        indent += 1
    return msg, indent


BODY_SEVERITY = 0.5  # an indented line that says this much is read for being an exception's message body
BODY_REACH = 40  # lines looked back through for the exception line a message body belongs to
BODY_READS = 8  # candidates read for it per job, weightiest first (one pass per file, to its last)


def _message_bodies(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str], indents: dict[int, int],
                    severity: dict[int, float], decorated: dict[int, Decoration]) -> set[int]:
    """The candidates whose first line is part of a multi-line exception message, not a traceback's code
    line, though indented as one: the indented lines right above it (blank ones aside) lead up to an
    exception line that ends in a colon, and no frame line stands between (PyTorch's "RuntimeError: Error(s)
    in loading state_dict for PeftModelForCausalLM:" and the space-indented "size mismatch for …" lines
    under it, which say what was wrong). Only lines that say enough (`BODY_SEVERITY`) and come within
    `BODY_REACH` lines after such an exception line (its first or last place in the file, as the parse keeps
    them) are read back, at most `BODY_READS` of them, each file once."""
    indented, heads = [], []
    for i in candidates:
        msg, indent = msgs[i], indents[i]
        if indent == 0 and _opens_message(msg):
            heads.append(i)
        elif severity.get(i, 0.0) >= BODY_SEVERITY and indent >= CODE_INDENT and not ERROR_LINE.match(msg):
            indented.append(i)
    if not heads:
        return set()
    indented.sort(key=lambda i: -severity.get(i, 0.0))
    first: dict[str, dict[int, int]] = {}  # per file: the candidates first seen there -> their line
    for i in indented[:BODY_READS]:
        path, at = next(((path, pos[i]) for path, pos in parsed.positions.items() if i in pos), ("", None))
        # read only where such an exception line was seen (first or last) in the lines above
        if at is not None and any(at[0] - BODY_REACH <= n < at[0] for h in heads
                                  for n in parsed.positions[path].get(h, ())):
            first.setdefault(path, {})[i] = at[0]
    bodies = set()
    for path, lines in first.items():  # one read of each file, up to its last such line
        windows = read_windows_before(path, lines.values(), BODY_REACH)
        bodies |= {i for i, line in lines.items()
                   if line in windows and _under_exception(windows[line], decorated.get(i))}
    return bodies


def _under_exception(window: Window, decoration: Decoration | None) -> bool:
    """Whether the lines above the window's anchor, indented ones and blank ones, lead up to an exception
    line that ends in a colon (no frame line between)."""
    for line in reversed(window.lines[: window.at]):
        msg, indent = _message_and_indent(line, decoration)
        if not msg.strip():
            continue
        if FRAME.match(msg):
            return False
        if indent == 0 and not msg[:1].isspace():
            return _opens_message(msg)
    return False


def _opens_message(msg: str) -> bool:
    """An exception line whose message goes on in the lines under it: it ends in a colon."""
    return bool(ERROR_LINE.match(msg) or _EXC_TYPE.match(msg)) and msg.rstrip().endswith(":")


def _decorated(parsed: ParsedJob, candidates: list[int]) -> dict[int, Decoration]:
    """The decoration of the file each candidate's first example line is from (the first file that
    holds it, in the order files were parsed), for the candidates whose file has one."""
    if not parsed.file_decorations:
        return {}
    left, out = set(candidates), {}
    for path, pos in parsed.positions.items():
        here = left.intersection(pos)
        deco = parsed.file_decorations.get(path)
        if deco is not None:
            out.update(dict.fromkeys(here, deco))
        left -= here
        if not left:
            break
    return out


def event_roles(parsed: ParsedJob, candidates: list[int], severity: dict[int, float]) -> Roles:
    """The roles of the candidate events (given their severities)."""
    out = Roles()
    label_rx = _lexicon()[1]
    msgs: dict[int, str] = {}
    indents: dict[int, int] = {}
    labels: list[int] = []
    indented: set[int] = set()
    decorated = _decorated(parsed, candidates)
    for i in candidates:
        t = parsed.templates[i]
        raw = t.examples[0] if t.examples else t.template
        msgs[i], indents[i] = _message_and_indent(raw, decorated.get(i))
    bodies = _message_bodies(parsed, candidates, msgs, indents, severity, decorated)
    for i in candidates:
        t = parsed.templates[i]
        role = lexicon_role(t.template)
        msg, indent = msgs[i], indents[i]
        if role is None and indent >= CODE_INDENT and not ERROR_LINE.match(msg) and i not in bodies:
            role = CONTEXT
            indented.add(i)
        if role is None and label_rx.search(msg):
            role = CONTEXT
            labels.append(i)
        if role is not None:
            out.role[i] = role
        if role in (CASCADE, WRAPPER) and roles_rx("disconnect").search(t.template):
            out.disconnects.add(i)
    _stacks(parsed, candidates, msgs, indents, severity, out)
    _label_successors(parsed, labels, severity, out, set(candidates))
    _chain_causes(parsed, candidates, msgs, out)
    _exception_lines(parsed, candidates, msgs, out)
    _traceback_intros(parsed, candidates, msgs, severity, out)
    _after_teardown(parsed, candidates, out)
    _quoting(parsed, candidates, severity, msgs, out)
    _killed_first(parsed, candidates, out)
    _excerpt(parsed, candidates, severity, msgs, indented, out)
    _open_traceback_ends(parsed, candidates, severity, msgs, out)
    _restated(parsed, candidates, severity, out)
    return out


def _restated(parsed: ParsedJob, candidates: list[int], severity: dict[int, float], out: Roles) -> None:
    """A line that restates the one right before it in its file (severity.yaml `restates`: the watchdog's
    "Exception (either an error or timeout) detected by watchdog at work: 140" or "failure detected by
    watchdog at work sequence id: 140" after its "Watchdog caught collective operation timeout:
    WorkNCCL(SeqNum=140 …)", `restated`) is one account of one failure with it. Where that line is the first
    of an event of its own, the restatement is its context: the event it restates is shown with the lines
    and ranks as the better of the two (the restatement's severity, and no role where it has none: its
    generic "error" outweighs the timeout's words, which the lexicon and the fault library list as a
    cascade), and its template, the one an SRE confirms as a pattern, names the collective. Otherwise (the
    line before is another line, or not that event's first: ranks interleaved in one console) the
    restatement is shown with the line before it first."""
    rx, target = roles_rx("restates"), roles_rx("restated")
    cands = set(candidates)
    starts: dict[str, dict[int, int]] = {}  # per file: line number -> the candidate first seen there
    for i in candidates:
        if not rx.search(parsed.templates[i].template):
            continue
        for path, pos in parsed.positions.items():
            at = pos.get(i)
            if at is None or at[0] < 1:
                continue
            if path not in starts:
                starts[path] = {first: j for j, (first, _) in pos.items() if j in cands}
            found = _restated_event(parsed, starts[path], at[0], rx, target)
            back = found[1] if found is not None else 1
            window = read_window(path, at[0], before=back, after=0)  # the line it restates, of its own rank
            if window is None or window.at < back or not window.lines[window.at - back].strip():
                continue
            shown = window.lines[window.at - back: window.at + 1]
            if found is not None:
                restated = found[0]
                if out.role.get(i) is None:
                    out.role.pop(restated, None)
                    out.restated.add(restated)
                out.inherited[restated] = max(out.inherited.get(restated, 0.0), severity.get(i, 0.0),
                                              out.inherited.get(i, 0.0))
                out.role[i] = CONTEXT
                _show_lines(out, restated, shown)
            else:
                _show_lines(out, i, shown)
            break


RESTATED_REACH = 3  # restatements in a row that are looked through for the line they restate


def _restated_event(parsed: ParsedJob, starts: dict[int, int], line: int, rx: re.Pattern[str],
                    target: re.Pattern[str]) -> tuple[int, int] | None:
    """(the candidate first seen on a line before `line`, how many lines before) past other restatements
    right before it (the watchdog's "Timeout at NCCL work: 600" comes after its "Exception (either an error
    or timeout) detected by watchdog at work: 600", both after the "Watchdog caught" line), when that
    candidate is what restatements restate (`target`); None where the line is no candidate's first or
    something else (an NCCL INFO line between them)."""
    for back in range(1, RESTATED_REACH + 1):
        j = starts.get(line - back)
        if j is None:
            return None
        template = parsed.templates[j].template
        if not rx.search(template):
            return (j, back) if target.search(template) else None
    return None


STOOD_SEVERITY = 0.6  # the code line a file's last, unfinished traceback ends at (see _open_traceback_ends)
_PY_FRAME = re.compile(r'^\s*File "[^"]*", line \d+,? in ')
_CODELESS_FRAME = re.compile(r'^\s*File "[^"]*\.(?:pyx|pxi|pxd)", line \d+,? in ')  # Cython: no code line


def _open_traceback_ends(parsed: ParsedJob, candidates: list[int], severity: dict[int, float],
                         msgs: dict[int, str], out: Roles) -> None:
    """A file that ends in a traceback's frame and its code line, with no exception after them, was
    stopped there: a hung process interrupted (`^C`, a launcher left waiting in `os.waitpid`) or a paste
    that ends at the stack the process stood in. With nothing alarming in the job (no error, no launcher's
    report, no timeout: a paste cut inside a traceback leaves its error out, not those), that code line is
    where it stood: no mere context, it weighs STOOD_SEVERITY (public: torch.distributed.launch's
    `os.waitpid` after the last epoch, fairseq's spawn `join=True,` after "done training")."""
    if parsed.status == "succeeded":
        return
    cands = set(candidates)
    if any(max(severity.get(i, 0.0), out.inherited.get(i, 0.0)) >= STOOD_SEVERITY
           and out.role.get(i) != CONTEXT for i in candidates):
        return  # an error, a launcher's report, a timeout: the job says what went wrong
    for pos in parsed.positions.values():
        last = heapq.nlargest(2, ((p[1], c) for c, p in pos.items()))  # the file's last two lines' templates
        if len(last) < 2 or last[0][1] not in cands or last[1][0] != last[0][0] - 1:
            continue
        code, frame = last[0][1], last[1][1]
        framed = _PY_FRAME.match(msgs.get(frame) or _first_message(parsed, frame))
        if out.role.get(code) == CONTEXT and framed:
            del out.role[code]
            out.inherited[code] = max(out.inherited.get(code, 0.0), STOOD_SEVERITY)


def _first_message(parsed: ParsedJob, i: int) -> str:
    t = parsed.templates[i]
    return _message_and_indent(t.examples[0] if t.examples else t.template)[0]


def _excerpt(parsed: ParsedJob, candidates: list[int], severity: dict[int, float], msgs: dict[int, str],
             indented: set[int], out: Roles) -> None:
    """A failed job whose whole content is one or two templates is an excerpt its reporter chose
    (`size mismatch for …: copying a param with shape …` three times): nothing in it is routine, so
    when no line of it is alarming, each with words weighs PASTE_SEVERITY and the diagnosis reports
    what it has instead of nothing. Without a traceback frame in it, an indented line is no code."""
    if parsed.status == "succeeded":
        return
    worded = [i for i, t in enumerate(parsed.templates) if _WORD.search(t.template.replace(MASK, " "))]
    if not worded or len(worded) > PASTE_TEMPLATES:
        return
    if any(severity.get(i, 0.0) >= PASTE_SEVERITY for i in candidates):
        return
    if not any(FRAME.match(msgs[i]) for i in candidates):
        for i in indented:
            if out.role.get(i) == CONTEXT:
                del out.role[i]
    for i in set(worded).intersection(candidates):
        if out.role.get(i) is None:
            out.inherited[i] = max(out.inherited.get(i, 0.0), PASTE_SEVERITY)


def _show_together(parsed: ParsedJob, out: Roles, event: int, lines: Iterable[int]) -> None:
    """Event `event` is shown with the first example line of each of `lines`, in their order."""
    _show_lines(out, event, (parsed.templates[j].examples[0] for j in lines if parsed.templates[j].examples))


def _show_lines(out: Roles, event: int, raws: Iterable[str]) -> None:
    """Event `event` is shown with the raw lines `raws`, in their order, each once."""
    shown = out.evidence.setdefault(event, [])
    for raw in raws:
        if raw not in shown:
            shown.append(raw)


def _stacks(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str], indents: dict[int, int],
            severity: dict[int, float], out: Roles) -> None:
    """Abort reports and return traces (`engine.errstacks`): the lines that only carry a message are
    context, the message weighs what they do, and a stack shown after a file's first is a consequence."""
    reading = read_stacks(parsed, candidates, msgs, {i: parsed.templates[i].level for i in candidates},
                          severity, indents)
    for i in reading.context:
        out.role[i] = CONTEXT
    for m, carriers in reading.carried.items():
        weight = max(severity.get(c, 0.0) for c in carriers)
        out.inherited[m] = max(out.inherited.get(m, 0.0), weight)
        if out.role.get(m) == CONTEXT:
            del out.role[m]  # the message itself, whatever its indent
    # the abort's line that names the exception ("terminate called after throwing an instance of
    # 'gloo::EnforceNotMet'") is shown with its message: the two lines are one report
    for m, intros in reading.introduced.items():
        _show_together(parsed, out, m, (*intros, m))
    # a hard-wrapped sentence is shown whole, its first line and the rest in their order
    for head, rest in reading.continues.items():
        out.wrapped.update(rest)
        _show_together(parsed, out, head, (head, *rest))
    weight = _chain()[1]
    for i in reading.causes:
        if out.role.get(i) is None:
            out.inherited[i] = max(out.inherited.get(i, 0.0), weight)
    for i in reading.threw:
        out.capped[i] = min(out.capped.get(i, 1.0), THROWN_SEVERITY)
    for i in reading.later:
        if out.role.get(i, CASCADE) == CASCADE:
            out.role[i] = CASCADE
            out.late.add(i)


def _fits(template: str, message: str) -> bool:
    """`message` is a line of `template` (one that keeps a word: "<*>" would fit every line)."""
    if not _WORD.search(template.replace(MASK, " ")):
        return False
    parts = [re.escape(p) for p in " ".join(template.split()).split(MASK)]
    return re.fullmatch(r".*?".join(parts), " ".join(message.split())) is not None


def _killed_first(parsed: ParsedJob, candidates: list[int], out: Roles) -> None:
    """The launcher's block of a rank killed first: its lines are reports, shown as the evidence."""
    blocks = first_failures(parsed)
    out.blocks = len(blocks)
    for block in blocks:
        if not block.killed:
            break
        out.killed_nodes.add(block.node)
        here = [i for i in candidates if i in parsed.positions.get(block.path, {})]
        for key in ("exitcode", "traceback"):
            raw = block.lines.get(key)
            if raw is None:
                continue
            msg = parse_header(raw, decoration=parsed.decoration_of(block.path)).message
            for i in here:
                if _fits(parsed.templates[i].template, msg):
                    out.role[i] = REPORT
                    lines = out.evidence.setdefault(i, [])
                    if raw not in lines:
                        lines.append(raw)
                    out.evidence_nodes.setdefault(i, set()).add(block.node)
                    break


def _after_teardown(parsed: ParsedJob, candidates: list[int], out: Roles) -> None:
    """Events first logged, in every file that holds them, after that file's teardown began."""
    marks = [i for i in candidates if out.role.get(i) in (CONSEQUENCE, REPORT)]
    if not marks:
        return
    start: dict[str, int] = {}
    for path, pos in parsed.positions.items():
        firsts = [pos[i][0] for i in marks if i in pos]
        if firsts:
            start[path] = min(firsts)
    for i in candidates:
        if out.role.get(i, CASCADE) != CASCADE:
            continue
        where = [(path, pos[i][0]) for path, pos in parsed.positions.items() if i in pos]
        if where and all(path in start and first > start[path] for path, first in where):
            out.late.add(i)
            out.role[i] = CASCADE


def _files_holding(parsed: ParsedJob, ids: list[int]
                   ) -> Iterator[tuple[dict[int, tuple[int, int]], list[int], dict[int, int]]]:
    """Per file holding some of `ids`: its positions, those of `ids` it holds, and which event each
    of its lines is the first line of."""
    for pos in parsed.positions.values():
        here = [i for i in ids if i in pos]
        if here:
            yield pos, here, {first: i for i, (first, _) in pos.items()}


def _label_successors(parsed: ParsedJob, labels: list[int], severity: dict[int, float], out: Roles,
                      candidates: set[int]) -> None:
    """A label line's content is the line after it: that event inherits the label's severity."""
    for pos, here, at in _files_holding(parsed, labels):
        for lab in here:
            nxt = at.get(pos[lab][0] + 1)
            if (nxt is not None and nxt in candidates and nxt not in out.role
                    and not _traceback_head(parsed, nxt)):
                out.inherited[nxt] = max(out.inherited.get(nxt, 0.0), severity.get(lab, 0.0))


@lru_cache(maxsize=1)
def _chain() -> tuple[re.Pattern[str], float]:
    roles = load("severity")["roles"]
    return re.compile(roles.get("chain") or "(?!)"), float(roles.get("chain_cause_severity", 0.0))


def _exception_lines(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str], out: Roles) -> None:
    """The line right after a traceback's (indented) code line, or right after its last frame where the
    frame shows no code line (Cython's `File "pyarrow/error.pxi", line 92, in pyarrow.lib.check_status`), in a
    file where a traceback began before it (its head, or, in a paste cut above it, its first frame), is the
    traceback's exception, unless it is a frame or a logged line: whatever the exception's class is called
    (`pyarrow.lib.ArrowInvalid: …`, `jax.errors.JaxRuntimeError: …`)."""
    weight = _chain()[1]
    heads = {i for i in candidates if _TRACEBACK.match(msgs[i])}
    frames = {i for i in candidates if _PY_FRAME.match(msgs[i])}
    if not heads and not frames:
        return
    # indented code, "^^^^" pointers (not the rest of a wrapped sentence: the line after it is no exception),
    # and the frames that show no code line under them (compiled Cython: .pyx, .pxi)
    body = ({i for i in candidates if out.role.get(i) == CONTEXT} - heads - out.wrapped
            | {i for i in frames if _CODELESS_FRAME.match(msgs[i])})
    for pos in parsed.positions.values():
        began = min((pos[i][0] for i in heads | frames if i in pos), default=None)
        if began is None:
            continue
        ends = {line for i in body if i in pos for line in pos[i]}
        for i, (first, _) in pos.items():
            if (first > began and first - 1 in ends and i in msgs and i not in out.role and i not in body
                    and i not in heads and msgs[i].strip() and not msgs[i][:1].isspace()
                    and not FRAME.match(msgs[i])
                    and parsed.templates[i].level is None):  # a logged line is no exception
                out.inherited[i] = max(out.inherited.get(i, 0.0), weight)


def _line_events(parsed: ParsedJob, pos: dict[int, tuple[int, int]]) -> dict[int, int]:
    """The lines of a file whose event is known: each event's first and last line there."""
    at = {}
    for i, (first, last) in pos.items():
        at.setdefault(first, i)
        at.setdefault(last, i)
    return at


def _is_exception(i: int, msgs: dict[int, str], out: Roles) -> bool:
    m = msgs.get(i, "")
    return (bool(_EXC_TYPE.match(m)) and out.role.get(i) != CONTEXT and not m[:1].isspace()
            and not FRAME.match(m))


def _traceback_intros(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str],
                      severity: dict[int, float], out: Roles) -> None:
    """A line that introduces the traceback right after it (`traceback_intro`: "Exception ignored in:
    <bound method …>", "Error in atexit._run_exitfuncs:", "-- Process 0 terminated with the following
    error:", or a label "…:") says where the traceback's exception was raised: the exception shows it
    first and weighs at least as much, the intro line is its context. And an exception without a message
    of its own ("torch.multiprocessing.spawn.ProcessRaisedException:") whose file shows another
    exception soon after is that one's wrapper (its message is what follows it)."""
    intro_rx, label_rx = roles_rx("traceback_intro"), _lexicon()[1]
    heads = {i for i, t in enumerate(parsed.templates) if _TRACEBACK.search(t.template)}
    pool = set(candidates)
    empty = {i for i in candidates if _EMPTY_EXC.match(msgs[i]) and out.role.get(i) is None}
    for pos in parsed.positions.values():
        if not heads.intersection(pos) and not empty.intersection(pos):
            continue
        at = _line_events(parsed, pos)
        lines = sorted(at)
        for k, line in enumerate(lines):
            i = at[line]
            if i in empty and pos[i][0] == line:
                inner = next((at[n] for n in lines[k + 1:] if n - line <= EMPTY_EXC_LINES
                              and at[n] in pool and at[n] not in empty and _is_exception(at[n], msgs, out)),
                             None)
                if inner is not None and out.role.get(i) is None:
                    out.role[i] = WRAPPER
                    cap = max(severity.get(inner, 0.0), QUOTE_MIN_SEVERITY)
                    out.capped[i] = min(out.capped.get(i, 1.0), cap)
            if i not in heads or k == 0:
                continue
            before = lines[k - 1]
            intro = at[before]
            m = msgs.get(intro, "")
            if (line - before > 2 or intro not in pool or intro in heads
                    or out.role.get(intro) not in (None, CONTEXT)
                    or FRAME.match(m) or not (intro_rx.search(m) or label_rx.search(m))):
                continue
            exc = next((at[n] for n in lines[k + 1:] if n - line <= TRACEBACK_LINES and at[n] in pool
                        and _is_exception(at[n], msgs, out)), None)
            if exc is None and out.role.get(intro) is None and intro_rx.search(m):
                # the traceback's exception is not in the file (a paste cut inside it): the intro line
                # ("Exception in thread Thread-3:", "Exception ignored in: <function …__del__>") is the
                # only account of it, and weighs as an exception does
                out.inherited[intro] = max(out.inherited.get(intro, 0.0), _chain()[1])
                continue
            if exc is None or exc == intro:
                continue
            out.role[intro] = CONTEXT
            out.inherited[exc] = max(out.inherited.get(exc, 0.0), severity.get(intro, 0.0))
            shown = out.evidence.setdefault(exc, [])
            for j in (intro, exc):
                raw = parsed.templates[j].examples[0] if parsed.templates[j].examples else None
                if raw is not None and raw not in shown:
                    shown.append(raw)


def _chain_causes(parsed: ParsedJob, candidates: list[int], msgs: dict[int, str], out: Roles) -> None:
    """The line before a chained exception's marker (blank lines aside) ends the first exception."""
    rx, weight = _chain()
    markers = [i for i in candidates if rx.search(msgs[i])]
    if not markers:
        return
    pool = set(candidates)
    for pos, here, at in _files_holding(parsed, markers):
        for m in here:
            for line in sorted(set(pos[m])):
                for back in range(line - 1, max(-1, line - 1 - CHAIN_LOOKBACK), -1):
                    i = at.get(back)
                    if i is None or (i in msgs and not msgs[i].strip()):
                        continue  # a line of an event first seen earlier (blank lines): look further
                    if i in pool and i not in out.role and i not in markers and not FRAME.match(msgs[i]):
                        out.inherited[i] = max(out.inherited.get(i, 0.0), weight)
                    break


def _traceback_head(parsed: ParsedJob, i: int) -> bool:
    """A traceback's first line: the content a label introduces is what it ends with, not this line."""
    return _TRACEBACK.search(parsed.templates[i].template) is not None


def _core(msg: str) -> str:
    return _EXC_TYPE.sub("", msg, count=1).strip()


def _quoting(parsed: ParsedJob, candidates: list[int], severity: dict[int, float], msgs: dict[int, str],
             out: Roles) -> None:
    """An event whose line holds another event's message is its wrapper, and weighs no more than it
    (a wrapper adds no alarm of its own)."""
    pool = sorted((i for i in candidates if severity.get(i, 0) >= QUOTE_MIN_SEVERITY),
                  key=lambda i: -severity[i])[:QUOTE_CANDIDATES]
    cores = {i: _core(msgs[i]) for i in pool}
    for a in pool:
        ca = cores[a]
        if len(ca) < QUOTE_MIN_CHARS or out.role.get(a) is not None:
            continue  # only the message of a possible root cause makes its quoter a wrapper
        ta = parsed.templates[a].first_seen
        for b in pool:
            if b == a or out.role.get(b, CASCADE) != CASCADE or cores[b] == ca:
                continue  # a cascade that quotes the error it echoes is its wrapper
            if not _quotes(ca, msgs[b]):
                continue
            tb = parsed.templates[b].first_seen
            if ta and tb and tb < ta:  # a wrapper does not come before what it wraps
                continue
            out.role[b] = WRAPPER
            out.capped[b] = min(out.capped.get(b, 1.0), severity[a])


def _quotes(quoted: str, line: str) -> bool:
    """`line` holds `quoted` and words of its own."""
    return quoted in line and len(line.replace(quoted, " ").split()) >= QUOTE_MIN_WORDS
