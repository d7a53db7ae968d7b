"""Stage attribution: in which stage (init … teardown) did the failure show?

Read where the failing rank failed: the rank file in which the first event (the root cause) first
appears, at the line where it does (`engine.window`). In order:

1. the frames of the traceback that ends at (or follows) that line, innermost first (a Python traceback,
   also behind a launcher's label, or a faulthandler dump's crashing thread), against the
   frame hints of data/stages.yaml (`save_checkpoint` → checkpointing, `__next__` → data_loading;
   standard-library and launcher frames skipped); a `weak` hint (a trainer's `fit`, a code line
   naming the loss: frames that hold several stages) gives way to the rank's log (2.);
2. what the rank logged before it: progress found in the data itself (a line that recurs with an
   increasing number: "iter N", tqdm bars, `{'loss': …, 'epoch': …}`, whatever its wording; it is in
   the stage its text names, else in training), checkpoint windows that open at a save and close
   at its end or when progress resumes, and the stage hints of data/stages.yaml. A save window
   another rank opened (another file, another rank prefix in a shared console) is not the failing
   rank's: it was training;
3. the other ranks: the stage markers seen last before the event by timestamps (when the clocks
   can be trusted), else the rank file with the most stage markers (in Megatron-LM only one rank
   logs iterations) — also when the rank's own log stops at set-up while the others were running.

When nothing supports a stage the answer is `unknown`; a failure on one of the first lines of its
file, with nothing before it, is in `init`.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from functools import lru_cache

from engine.headers import parse_header
from engine.model import ParsedJob, StageBasis
from engine.rules import load
from engine.severity import severity
from engine.window import Window, read_window

UNKNOWN = "unknown"
SETUP = ("init", "data_loading", "model_loading")  # stages before the first training step
RUNNING = ("training", "checkpointing", "teardown")
MARKER_MAX_SEVERITY = 0.6  # an error line is not progress, whatever words it shares with a stage
PROGRESS_MIN = 3  # occurrences of a line shape with a rising number that make it progress
INIT_LINES = 3  # a failure with at most this many lines before it, and no marker, is in init
TRACEBACK_REACH = 400  # lines searched back from the failure for its traceback's start
MESSAGE_LINES = 6  # lines an exception's message may take between its traceback and the failure line
PEER_EVENTS = 3  # the next events whose tracebacks are read when the first one's file shows no stage
SIBLINGS = 2  # other files of the failing rank's folder read when its own shows no stage
HEAD_CHARS = 60  # a stage hint this near the start of a line is what the line says it was doing
# A frame line of a Python traceback (`File "…", line N, in f`) or of a faulthandler dump (`File "…", line N
# in f`, no comma), also behind a launcher's label that the header parser leaves on an indented line (`srun
# -l`'s "0:   File …", "[177/train/578 (pid 9)] [uuid]   File …"): `pre`, stripped from the code line too.
_LABEL = r"(?:(?P<pre>\S.{0,120}?[\]:>)])\s+)?"
_FRAME = re.compile(_LABEL + r'File "(?P<file>[^"]*)", line \d+(?P<comma>,)? in (?P<func>\S+)')
_TRACEBACK = re.compile(_LABEL + r"Traceback \(most recent call last\):")
_CALL_FIRST = re.compile(r"\(most recent call first\):?\s*$")  # a faulthandler dump's thread: innermost first
# "Exception ignored in: <function X.__del__ …>": Python's report of an exception in a finalizer or an
# atexit/GC callback; the traceback under it is that callback's, not the call path of what came before
_IGNORED_IN = re.compile(r"^Exception ignored in\b")
_CURRENT_THREAD = re.compile(r"^Current thread 0x[0-9a-fA-F]+ \(most recent call first\)")
FAULT_REACH = 60  # lines after the failure line searched for a faulthandler dump's crashing thread
_CODE = re.compile(r"^(?:raise |return |File \"|self\.)|(?:Error|Exception)\(")  # traceback code
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DIGIT_RUN = re.compile(r"\d+")  # a line's shape: each digit run as "0" ("iter 990", "iter 1000" alike)
_BAR = re.compile(r"\|[\u2580-\u259f #=>.-]*\|")  # ... and a bar's glyphs as one ("|▍   |", "|███ |")


def _shape(msg: str) -> str:
    """A line's shape: what stays when the numbers and a progress bar's filling change."""
    return _DIGIT_RUN.sub("0", _BAR.sub("|#|", msg))


@lru_cache(maxsize=1)
def _rules() -> list[tuple[str, re.Pattern[str]]]:
    data = load("stages")
    return [(stage, re.compile(rx)) for stage in data["order"] for rx in data["stages"].get(stage, [])]


_Rx = re.Pattern[str] | None


@lru_cache(maxsize=1)
def _frame_rules() -> list[tuple[str, _Rx, _Rx, _Rx, bool]]:
    def rx(r: dict, part: str, whole: bool = False) -> re.Pattern[str] | None:
        return re.compile(f"(?:{r[part]})$" if whole else r[part]) if r.get(part) else None

    return [(r["stage"], rx(r, "func", True), rx(r, "file"), rx(r, "code"), bool(r.get("weak")))
            for r in load("stages")["frames"]]


@lru_cache(maxsize=1)
def _module_level_rules() -> list[tuple[str, re.Pattern[str]]]:
    """The code rules read first in a `<module>` frame (stages.yaml `module_level`: an import there)."""
    return [(r["stage"], re.compile(r["code"])) for r in load("stages")["frames"]
            if r.get("module_level") and r.get("code")]


@lru_cache(maxsize=1)
def _clock() -> re.Pattern[str]:
    """A wall-clock stamp a message carries (a logger's own time after a launcher prefix the header does not
    strip: "[titan] 2026-11-20 17:45:00,388 - root - INFO - …"), as the parser masks one (data/masking.yaml
    `timestamp`, `time`, `ctime`): it rises on every line, so it is no progress."""
    masks = {m["name"]: m["regex"] for m in load("masking")["masks"]}
    return re.compile("|".join(f"(?:{masks[name]})" for name in ("timestamp", "time", "ctime")))


@lru_cache(maxsize=8)
def _optional_rx(key: str) -> re.Pattern[str] | None:
    """The regex stages.yaml gives under `key` (finished_markers, death_notices, advisory,
    not_progress), compiled once; None when the file has none."""
    rx = load("stages").get(key)
    return re.compile(rx) if rx else None


@lru_cache(maxsize=1)
def _closed() -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{rx})" for rx in load("stages")["checkpoint_closed"]))


def stage_of_template(template: str) -> str | None:
    """The stage a template (or a line's message) marks, if it is a stage marker."""
    for stage, rx in _rules():
        if rx.search(template):
            return stage
    return None


def stage_answer(parsed: ParsedJob, event_ids: list[int], *, trust_time: bool = True
                 ) -> tuple[str, StageBasis | None]:
    """The stage in force where the first of `event_ids` (most indicative first) first appears, the
    rules' answer combined with the learned stage model (engine/stage_model.py), and what it rests on
    (`engine.model.StageBasis`; None without events)."""
    from engine.stage_model import decide  # it reads this module's frames and timeline

    if not event_ids:
        return UNKNOWN, None
    failing = failing_window(parsed, event_ids)  # read once: the rules and the model both read it
    rule, on_job_timeline = _rule_stage(parsed, event_ids, trust_time, failing)
    if on_job_timeline:  # the failure's place among the other nodes decided: evidence, not words
        return rule, StageBasis("timeline")
    return decide(parsed, event_ids, rule, trust_time=trust_time, failing=failing)


Failing = tuple[tuple[str, int] | None, Window | None]  # (rank file, line) of the failure; its window


def failing_window(parsed: ParsedJob, event_ids: list[int]) -> Failing:
    """Where the first of `event_ids` shows first (`_failing_file`), and the window of lines around it
    (None, None: no event or no rank file shows it; a window of None: the file cannot be read)."""
    where = _failing_file(parsed, event_ids[0]) if event_ids else None
    return where, read_window(*where) if where is not None else None


def rule_stage(parsed: ParsedJob, event_ids: list[int], *, trust_time: bool = True) -> str:
    """The rules' stage where the first of `event_ids` (most indicative first) first appears."""
    return _rule_stage(parsed, event_ids, trust_time, failing_window(parsed, event_ids))[0]


def _rule_stage(parsed: ParsedJob, event_ids: list[int], trust_time: bool, failing: Failing
                ) -> tuple[str, bool]:
    """`rule_stage`, and whether the job's own timeline across nodes (`_by_job_position`) decided it."""
    if not event_ids:
        return UNKNOWN, False
    eid = event_ids[0]
    where, window = failing
    local = framed = None
    died = False
    if where is not None:
        if window is not None:
            died = _death_noticed(parsed.templates[eid].template)
            framed = None if died else frames_evidence(window)
            if framed is not None and not framed[1]:
                return framed[0], False
            local = log_stage(window) or _own_stream_stage(window) or _sibling_stage(parsed, where[0])
    progressed = progress_stage(window) if window is not None else None
    if local is None and progressed not in (None, "training"):
        local = progressed  # a bar whose words name a stage ("Running tokenizer on dataset: 9%") marks it
    position = local or progressed
    if died and position is not None:
        own = _same_rank_stage(parsed, where[0]) if position in SETUP and where is not None else None
        if own in RUNNING:
            # the file stops at set-up (the rank's stderr: "loading weights file …") while the same rank's
            # other file (its stdout) shows it running: the worker died in the run
            return own, False
        return position, False
    stage = _stage_after_frames(parsed, event_ids, trust_time, where, framed, local)
    if progressed is not None and stage in ("init", UNKNOWN):
        return progressed, False  # the job had made progress: not in set-up, whatever the error's words
    placed = _by_job_position(parsed, stage, where, window, eid)
    return placed, placed != stage


SETUP_ONLY_LINES = 20  # a rank that logged at most this many lines before its traceback was setting up


def _by_job_position(parsed: ParsedJob, stage: str, where: tuple[str, int] | None,
                     window: Window | None, eid: int | None = None) -> str:
    """Where the failure sits on the job's own timeline, when the rank's evidence is weak: after the
    other nodes' workers had finished (training was over everywhere: teardown), or, when every node
    fails alike in a job that never made progress anywhere, on a rank that had logged only a few
    lines before its traceback (a start-up check: init)."""
    if where is None:
        return stage
    node = parsed.file_nodes.get(where[0])
    if stage == "training" and _others_finished(parsed, node):
        return "teardown"
    if (stage == UNKNOWN and window is not None and eid is not None and _everywhere(parsed, eid)
            and not parsed.iterations and traceback_start(window) <= SETUP_ONLY_LINES
            and _job_stage(parsed, -1, False) in (None, "init")):
        return "init"
    return stage


def _everywhere(parsed: ParsedJob, eid: int) -> bool:
    """Whether event `eid` shows on every node of a job of several (a check every rank fails alike)."""
    nodes = set(parsed.node_counts)
    return len(nodes) > 1 and nodes <= set(parsed.templates[eid].nodes)


def _others_finished(parsed: ParsedJob, node: str | None) -> bool:
    """Whether a node other than `node` shows that its workers had finished (`finished_markers`)."""
    rx = _optional_rx("finished_markers")
    if rx is None or node is None:
        return False
    return any(rx.search(t.template) and any(n != node for n in t.nodes) for t in parsed.templates)


def _death_noticed(failing: str) -> bool:
    """Whether the failing line reports that a process was killed (a DataLoader worker killed by a
    signal): its traceback is where the survivor noticed, not the stage the job was in, so the rank's
    own log and its progress decide (then the other ranks), not its frames."""
    rx = _optional_rx("death_notices")
    return rx is not None and rx.search(failing) is not None


def _stage_after_frames(parsed: ParsedJob, event_ids: list[int], trust_time: bool,
                        where: tuple[str, int] | None, framed: tuple[str, bool] | None,
                        local: str | None) -> str:
    """The stage when no strong frame decides: the rank's own log (`local`), a weak frame, the other
    ranks, the failure's typical stage."""
    eid = event_ids[0]
    own = where[0] if where is not None else None
    job = _job_stage(parsed, eid, trust_time, own) if local in SETUP else None
    if job in RUNNING:
        # the rank's log stops at set-up while the other ranks were already running: a rank that logs
        # no progress of its own (in Megatron-LM only the last rank logs iterations), or one killed
        # before its buffered output was written
        return job
    if framed is not None:
        # a weak frame (a trainer's `fit`) gives way to what the rank's own log shows
        return local if local is not None else framed[0]
    if local is not None and local != "init":
        return local
    # nothing, or only `init`, before the failure: a launcher's own log (its rendezvous lines)
    # reporting a rank killed from outside, or a rank that logs nothing after its setup (in
    # Megatron-LM only the last rank logs iterations). The stage is the one the other ranks were in
    # at that time: where their tracebacks show them waiting, else their stage markers.
    peers = _peer_frames_stage(parsed, event_ids[1:1 + PEER_EVENTS])
    if peers is not None and peers != "init":
        return peers
    hinted = failure_hint(parsed.templates[eid].template)
    if local is not None and hinted == "init":
        return local
    if local not in SETUP:  # computed above otherwise
        job = _job_stage(parsed, eid, trust_time, own)
    if job is not None and job != "init":
        return job
    if local is not None:
        return local
    if job is not None:
        return job
    if hinted is not None:
        return hinted
    if where is not None and where[1] <= INIT_LINES:
        return "init"
    return UNKNOWN


def _peer_frames_stage(parsed: ParsedJob, event_ids: list[int]) -> str | None:
    """The stage the tracebacks of the next events name (the other ranks' errors: where they were
    waiting when the failing rank stopped answering)."""
    for eid in event_ids:
        where = _failing_file(parsed, eid)
        window = read_window(*where) if where is not None else None
        found = frames_stage(window) if window is not None else None
        if found is not None:
            return found
    return None


def _job_stage(parsed: ParsedJob, eid: int, trust_time: bool, own: str | None = None) -> str | None:
    """The stage the other ranks show when event `eid` appears: the stage marker seen last before it
    by timestamps (when the clocks can be trusted), else in the rank file with the most iterations
    and stage markers. A checkpoint save that only other files log is theirs: the failing rank
    (file `own`) was training meanwhile."""
    markers = {
        i: s for i, t in enumerate(parsed.templates)
        if (s := stage_of_template(t.template)) and severity(t.template, t.level) < MARKER_MAX_SEVERITY
        and not _CODE.search(t.template)
    }
    own_ids = parsed.positions.get(own, {}) if own is not None else {}
    by_time = _stage_by_time(parsed, eid, markers) if trust_time else None
    if by_time is not None:
        stage, mid = by_time
        return "training" if stage == "checkpointing" and own is not None and mid not in own_ids else stage
    main = max(parsed.positions.items(), default=None,
               key=lambda kv: (len(parsed.iterations.get(kv[0], ())), sum(1 for m in markers if m in kv[1]),
                               parsed.file_lines.get(kv[0], 0)))
    if main is not None and any(m in main[1] for m in markers):
        main_path, main_pos = main
        at = main_pos[eid][0] if eid in main_pos else parsed.file_lines.get(main_path, 0) + 1
        stage = _stage_before(main_pos, at, markers, eid)
        if stage in (None, *SETUP):
            stage = _files_progress(parsed, main_path, at) or stage
        if stage == "checkpointing" and own is not None and main_path != own:
            return "training"
        return stage
    return None


PROGRESS_FILES = 8  # rank files (the longest first) read for progress no marker names


def _files_progress(parsed: ParsedJob, main: str, at: int) -> str | None:
    """The running stage the main rank file shows before line `at`, else another rank file by its end
    (the longest first): progress read from the data (a line shape recurring with a rising number:
    nanoGPT's `iter N: loss …`, printed by one rank only), which no marker names."""
    others = sorted((p for p in parsed.positions if p != main), key=lambda p: -parsed.file_lines.get(p, 0))
    places = [(main, max(0, at - 1)), *((p, parsed.file_lines.get(p, 0)) for p in others)]
    for path, line in places[:PROGRESS_FILES]:
        window = read_window(path, line)
        found = log_stage(window) if window is not None else None
        if found in RUNNING:
            return found
    return None


@lru_cache(maxsize=1)
def _failure_hints() -> list[tuple[str, re.Pattern[str]]]:
    return [(h["stage"], re.compile(h["regex"])) for h in load("stages").get("failure_hints", [])]


def failure_hint(template: str) -> str | None:
    """The stage an error of this kind typically shows in, for logs that show none of their own."""
    text = failing_words(template)
    for stage, rx in _failure_hints():
        if rx.search(text):
            return stage
    return None


def failing_words(text: str) -> str:
    """An error line without the advice that follows it ("… To adjust the kill threshold, set the
    environment variable …"): what the hints read."""
    rx = _optional_rx("advisory")
    m = rx.search(text) if rx is not None else None
    return text[: m.start()] if m is not None else text


@lru_cache(maxsize=1)
def _progress_evidence() -> list[tuple[int, re.Pattern[str]]]:
    return [(int(r["min"]), re.compile(r["regex"])) for r in load("stages").get("progress_evidence", [])]


def progress_stage(window: Window) -> str | None:
    """The stage of the last progress the failing rank's lines show up to and including the failing
    line (a tqdm bar past 0, a step or iteration count, a collective sequence number): the stage the
    line's text names, else training. None: no sign that the job was past set-up."""
    end = min(window.at, len(window.lines) - 1)
    for line in reversed(window.lines[: end + 1]):
        for part in reversed(line.split("\r")):
            for low, rx in _progress_evidence():
                m = rx.search(part)
                if m is not None and int(m.group("n")) >= low:
                    named = stage_of_template(_progress_text(part, m.start()))
                    return named if named not in (None, "init") else "training"
    return None


def _progress_text(part: str, at: int) -> str:
    """The words before the progress number at `at`, without the line's header: they say what
    progressed ("Running tokenizer on dataset: 9%|…| 280000/2969526 [29:55<"). A header the parser
    finds after the number (a glog `[E …]` of an error glued to a tqdm bar) is not the bar's: then the
    line's text up to the number."""
    msg = _message(part)
    head = len(part) - len(msg) if part.endswith(msg) else 0
    return (part[head:at] if head <= at else part[:at]) or msg or part


def _own_stream_stage(window: Window) -> str | None:
    """What the failing rank's own lines of a shared console show, those listed after the failure
    included: a launcher tails each rank's stdout and stderr apart, so the stdout a rank wrote
    before its traceback may come after it; when the rank dies, its output ends."""
    if not 0 <= window.at < len(window.lines):
        return None
    rank = parse_header(window.lines[window.at]).rank
    if rank is None:
        return None
    own = [ln for k, ln in enumerate(window.lines) if k != window.at and parse_header(ln).rank == rank]
    if not own:
        return None
    return log_stage(Window(path=window.path, anchor=len(own), lines=own))


def _sibling_stage(parsed: ParsedJob, path: str) -> str | None:
    """What the other files of the failing rank's folder (its stdout beside its stderr) show by
    their end, the one with the most lines first."""
    folder = os.path.dirname(path)
    return _first_log_stage(parsed, [p for p in parsed.positions
                                     if p != path and os.path.dirname(p) == folder])


def _first_log_stage(parsed: ParsedJob, paths: list[str]) -> str | None:
    """The stage the end of the first of `paths` (the longest first, at most SIBLINGS) shows."""
    for p in sorted(paths, key=lambda p: -parsed.file_lines.get(p, 0))[:SIBLINGS]:
        window = read_window(p, parsed.file_lines.get(p, 0))
        found = log_stage(window) if window is not None else None
        if found is not None:
            return found
    return None


_RANK_NUMBER = re.compile(r"(\d+)\D*$")


def _same_rank_stage(parsed: ParsedJob, path: str) -> str | None:
    """What the failing rank's other files show by their end: the files beside `path` whose name ends in
    the same number ("stdout-rank40.log" beside "stderr-rank40.log.gz"), the longest first; None when its
    name has no number or no such file shows a stage."""
    number = _name_number(path)
    if number is None:
        return None
    folder = os.path.dirname(path)
    return _first_log_stage(parsed, [p for p in parsed.positions if p != path
                                     and os.path.dirname(p) == folder and _name_number(p) == number])


def _name_number(path: str) -> str | None:
    """The last number in a file's name before its extensions ("stderr-rank40.log.gz" → "40")."""
    m = _RANK_NUMBER.search(os.path.basename(path).split(".")[0])
    return m.group(1) if m is not None else None


def _failing_file(parsed: ParsedJob, eid: int) -> tuple[str, int] | None:
    """(rank file, line number) where event `eid` shows first: on the node that logged it first
    (by timestamps), at its first line there."""
    best: tuple[str, int, str] | None = None
    for path, pos in parsed.positions.items():
        if eid not in pos:
            continue
        node = parsed.file_nodes.get(path, "")
        ts = parsed.node_first_seen.get(node, {}).get(eid) or "~"
        key = (ts, pos[eid][0], path)
        if best is None or key < best:
            best = key
    return (best[2], best[1]) if best else None


def _message(line: str) -> str:
    return parse_header(line).message


_last_messages: tuple[list[str] | None, list[str]] = (None, [])  # the window lines read last, their messages


def window_messages(lines: list[str]) -> list[str]:
    """The message of each of a window's `lines` (`parse_header`), read once per window: the rules and
    the stage model read the failing window's lines several times (held here, the list stays itself)."""
    global _last_messages
    last = _last_messages
    if last[0] is lines:
        return last[1]
    msgs = [_message(x) for x in lines]
    _last_messages = (lines, msgs)
    return msgs


Frame = tuple[str, str, str]  # (file, function, code line)


def _frames(window: Window) -> list[Frame]:
    """The frames (function and code line) of the traceback the failure line ends (pasted ones may
    have lost their head), or else of the first one that starts after it; innermost first."""
    msgs = window_messages(window.lines)
    at = min(window.at, len(msgs) - 1)
    if at < 0:
        return []
    frames = _frames_back(msgs, at)
    if frames:
        return frames
    rank = parse_header(window.lines[at]).rank
    for i in range(at + 1, len(msgs)):  # the failure line comes before its traceback (NCCL WARN ...)
        if _TRACEBACK.match(msgs[i]):
            if parse_header(window.lines[i]).rank not in (None, rank):
                return []  # another rank's traceback (a launcher's line is followed by its workers')
            if i > at + 1 and _IGNORED_IN.match(msgs[i - 1]):
                return []  # a finalizer's own exception, raised later (at exit, in the collector)
            end = next((j for j in range(i + 1, len(msgs)) if not _traceback_line(msgs, j)), len(msgs))
            return _frames_back(msgs, end)
    for i in range(at + 1, min(len(msgs), at + 1 + FAULT_REACH)):  # "Fatal Python error: …": faulthandler
        if _CURRENT_THREAD.match(msgs[i]) and i + 1 < len(msgs) and _FRAME.match(msgs[i + 1]):
            end = next((j for j in range(i + 1, len(msgs)) if not _FRAME.match(msgs[j])), len(msgs))
            return _frames_back(msgs, end)
    for i in range(at + 1, min(len(msgs), at + 1 + MESSAGE_LINES)):  # a pasted excerpt: frames, no head
        if _FRAME.match(msgs[i]):
            end = next((j for j in range(i + 1, len(msgs)) if not _traceback_line(msgs, j)), len(msgs))
            return _frames_back(msgs, end)
    return []


def _traceback_line(msgs: list[str], i: int) -> bool:
    """A frame line, the code line under one, or a caret marker line."""
    m = msgs[i]
    return bool(_FRAME.match(m)) or (i > 0 and bool(_FRAME.match(msgs[i - 1]))) or m.startswith(("^", "~"))


def _frames_back(msgs: list[str], end: int) -> list[Frame]:
    """The frames of the traceback block that ends just before line `end` (or before the exception
    message lines that end there: "ncclInternalError: …", "Last error:", …), innermost first (a
    faulthandler dump lists them so already: its thread's line says "most recent call first")."""
    frames: list[Frame] = []
    i = end - 1
    lead = 0
    while i >= 0 and lead < MESSAGE_LINES and not _traceback_line(msgs, i):
        i, lead = i - 1, lead + 1
    if lead == MESSAGE_LINES or i < 0:
        return []
    while i >= 0 and i > end - TRACEBACK_REACH and _traceback_line(msgs, i):
        m = _FRAME.match(msgs[i])
        if m is not None:
            code = msgs[i + 1] if i + 1 < end and m.group("comma") and not _FRAME.match(msgs[i + 1]) else ""
            pre = m.group("pre")
            if pre and code.startswith(pre):
                code = code[len(pre):].lstrip()
            frames.append((m.group("file"), m.group("func"), code))
        i -= 1
    if i >= 0 and _CALL_FIRST.search(msgs[i]):
        frames.reverse()
    return frames


def frames_stage(window: Window) -> str | None:
    """The stage named by the innermost frame of the failing traceback that a frame hint knows
    (the launcher's own frames are not the program's)."""
    found = frames_evidence(window)
    return found[0] if found else None


def frames_evidence(window: Window) -> tuple[str, bool] | None:
    """(stage, weak) of the innermost frame of the failing traceback that a frame hint knows; weak
    when the hint names a frame that holds several stages (a trainer's `fit`). The launcher's own
    frames and the standard library's are not the program's."""
    return frame_list_evidence(_frames(window))


def frame_list_evidence(frames: list[Frame]) -> tuple[str, bool] | None:
    """`frames_evidence` of a traceback's frames (innermost first)."""
    found = frame_rule_evidence(frames)
    return found[:2] if found is not None else None


def frame_rule_evidence(frames: list[Frame]) -> tuple[str, bool, bool] | None:
    """(stage, weak, by code) of the innermost frame a frame hint knows, as `frame_list_evidence`; `by
    code` when the hint that knows it reads its code line only (`trainer = Trainer(`), not its function's
    name, its file or the words of its name."""
    for file, func, code in frames:
        if _foreign_frame(file):
            continue
        if func == "<module>":
            for stage, code_rx in _module_level_rules():
                if code_rx.search(code):
                    return stage, False, False
        for stage, func_rx, file_rx, code_rx, weak in _frame_rules():
            if ((func_rx is None or func_rx.match(func)) and (file_rx is None or file_rx.search(file))
                    and (code_rx is None or code_rx.search(code))):
                return stage, weak, func_rx is None and file_rx is None
        worded = frame_words_stage(func, file)
        if worded is not None:
            return worded, False, False
    return None


_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def name_words(func: str) -> list[str]:
    """The words of a function name, split on `_`, dots and camelCase, lower-cased
    (`llama_model_forward` → llama, model, forward; `loadStateDict` → load, state, dict)."""
    return [w.lower() for w in _WORD.findall(func)]


@lru_cache(maxsize=1)
def _word_rules() -> list[tuple[str, frozenset[str], frozenset[str], re.Pattern[str] | None]]:
    return [(r["stage"], frozenset(r["words"]), frozenset(r.get("with", ())),
             re.compile(r["file"]) if r.get("file") else None)
            for r in load("stages").get("frame_words", [])]


def frame_words_stage(func: str, file: str = "") -> str | None:
    """The stage the words of a compound function name point to (data/stages.yaml `frame_words`), if
    any. A one-word name (`save`, `step`) is the whole-name rules' to judge: they know where it is
    ambiguous (a library's `save` is `numpy.save` as often as a checkpoint)."""
    split = name_words(func)
    if len(split) < 2:
        return None
    words = set(split)
    for stage, need, also, file_rx in _word_rules():
        if words & need and (not also or words & also) and (file_rx is None or file_rx.search(file)):
            return stage
    return None


# the interpreter's own library: `/usr/lib/python3.10/os.py`, a path pasted relative (`lib/python3.9/os.py`),
# or Windows' layout, where the version is not in the path (`…\anaconda3\envs\x\lib\os.py`,
# `C:\Python39\Lib\…`); never a package installed into it (site-packages, dist-packages)
_STDLIB = re.compile(r"(?:^|/)lib/python\d+(?:\.\d+)?/(?!.*(?:site|dist)-packages/)"
                     r"|(?:conda\d?|[Pp]ython\d*|envs\\[^\\]+)\\[Ll]ib\\(?!.*(?:site|dist)-packages\\)")


def _foreign_frame(file: str) -> bool:
    """A frame of the launcher (its agent's code) or of the Python standard library."""
    return ("/distributed/elastic/" in file or file.endswith(("/distributed/run.py", "/launcher/api.py"))
            or _STDLIB.search(file) is not None)


_last_log_stage: tuple[Window | None, str | None] = (None, None)  # the window read last and its stage


def log_stage(window: Window) -> str | None:
    """The stage the rank's own log shows before the failure line (None: it shows none). The rules
    and the stage model read the failing window alike (`stage_answer`): it is read once."""
    global _last_log_stage
    last = _last_log_stage
    if last[0] is window:
        return last[1]
    found = _log_stage(window)
    _last_log_stage = (window, found)
    return found


def _log_stage(window: Window) -> str | None:
    segments: list[tuple[int, str]] = []
    msgs = window_messages(window.lines)
    for k, line in enumerate(window.lines[: traceback_start(window)]):
        parts = line.split("\r")
        for msg in (_message(part) for part in parts) if len(parts) > 1 else (msgs[k],):
            if msg:
                segments.append((k, msg))
    at = window.lines[window.at] if 0 <= window.at < len(window.lines) else ""
    failing_rank = parse_header(at).rank if at else None
    head = _message(at.split("\r")[-1])[:HEAD_CHARS]  # the failure line may start with what it was doing
    alarming = [severity(msg, None) >= MARKER_MAX_SEVERITY for _, msg in segments]
    shapes = [_shape(msg) for _, msg in segments]
    progress = _progress(segments, alarming, shapes)
    stage: str | None = None
    before_ckpt: str | None = None
    opener: int | None = None  # the rank whose launcher prefix the line that opened the save window names
    saves: set[int] = set()  # segments that open or close a save
    for n, ((k, msg), alarm, key) in enumerate(zip(segments, alarming, shapes, strict=True)):
        if alarm and key not in progress:
            hint = _head_stage(msg[:HEAD_CHARS])  # "Loading checkpoint shards: 14%|…W0629 … SIGTERM"
            if hint is None:
                continue
        else:
            hint = stage_of_template(msg)
        closed = _closed().search(msg) is not None
        if closed or hint == "checkpointing":
            saves.add(n)
        if stage == "checkpointing" and (closed or key in progress and hint != "checkpointing"):
            stage = before_ckpt or "training"  # the save finished, or progress resumed after it
            if closed:
                continue
        if key in progress and hint != "checkpointing":  # periodic saves recur too: each opens a window
            stage = hint if hint not in (None, "init") else "training"
        elif hint == "checkpointing" and not closed:
            if stage != "checkpointing":
                before_ckpt = stage
            stage, opener = hint, parse_header(window.lines[k]).rank
        elif hint is not None and not (hint == "init" and stage not in (None, "init")):
            stage = hint
    head_hint = _head_stage(head) if head else None
    if head_hint is not None and head_hint != "init":
        return head_hint
    if stage == "checkpointing" and None not in (opener, failing_rank) and opener != failing_rank:
        return before_ckpt or "training"  # a shared console: the save is another rank's
    if stage == "training" and _save_came_next(shapes, saves):
        return "checkpointing"
    return stage


def _save_came_next(shapes: list[str], saves: set[int]) -> bool:
    """The rank's last line before the failure is one after which, every earlier time the rank logged it,
    a save came (a line opening or closing one): the rank failed where its periodic save was due — in the
    save, which some programs log only when it is done (MXNet's "Epoch[38] Time cost=76.2", then "Saved
    checkpoint to …-0039.params"; "Epoch[39] Time cost=75.3", then the failed write)."""
    if len(shapes) < 2 or len(shapes) - 1 in saves:
        return False
    last = shapes[-1]
    earlier = [j for j in range(len(shapes) - 1) if shapes[j] == last]
    return bool(earlier) and all(j + 1 in saves for j in earlier)


_CHAINED = re.compile(r"^(?:During handling of the above exception|The above exception was the direct cause)")


def traceback_start(window: Window) -> int:
    """Where the traceback that ends at the failure line starts: its `Traceback …` line (the first of a
    chain: "During handling of the above exception, another exception occurred:"), else its outermost
    frame (a pasted traceback that lost its head); the failure line itself when no traceback ends there.
    Up to MESSAGE_LINES lines of an exception's message may stand between frames and what follows them.
    What comes before it is what the rank logged; from it to the failure line is the failure's own
    (frames, code lines, messages): the rules' log stage and the stage model's features both read it so."""
    at = max(0, window.at)
    if at >= len(window.lines):  # no failure line in the window (a rank's own lines, listed apart)
        return at
    msgs: dict[int, str] = {}

    def msg(i: int) -> str:
        if i not in msgs:
            msgs[i] = _message(window.lines[i])
        return msgs[i]

    def in_frames(i: int) -> bool:  # a frame line, the code line under one, or a caret marker line
        m = msg(i)
        return bool(_FRAME.match(m)) or m.startswith(("^", "~")) or (i > 0 and bool(_FRAME.match(msg(i - 1))))

    start, i, low = at, at - 1, max(-1, at - TRACEBACK_REACH)
    while i > low:
        lead = 0  # the exception's message lines, between the frames and the failure (or the next head)
        while i > low and lead < MESSAGE_LINES and not in_frames(i) and not _TRACEBACK.match(msg(i)):
            i, lead = i - 1, lead + 1
        if i <= low or lead == MESSAGE_LINES:
            break
        while i > low and in_frames(i):
            i -= 1
        if i <= low or not _TRACEBACK.match(msg(i)):
            start = i + 1 if i + 1 < start else start  # a headless traceback starts at its outermost frame
            break
        start, i = i, i - 1
        while i > low and not msg(i).strip():
            i -= 1
        if i <= low or not _CHAINED.match(msg(i)):
            break
        i -= 1  # the traceback this one was raised while handling
    return start


def _head_stage(text: str) -> str | None:
    """The stage a line names at its very start (what it was doing when an error was glued to it)."""
    for stage, rx in _rules():
        m = rx.search(text)
        if m is not None and m.start() <= 2:
            return stage
    return None


def _progress(segments: list[tuple[int, str]], alarming: list[bool], shapes: list[str]) -> set[str]:
    """Line shapes (`_shape`, per segment like `alarming`) that recur with a rising number: progress,
    whatever the words (not stack frames nor errors and warnings (`alarming`): their numbers are ports,
    retries, frame indexes; not a clock stamp in the message, `_clock`: set-up lines that every rank writes
    into one console rise by their time alone)."""
    numbers: dict[str, list[list[float]]] = defaultdict(list)
    frames = _optional_rx("not_progress")
    for (_, msg), alarm, key in zip(segments, alarming, shapes, strict=True):
        if frames is not None and frames.search(msg) or alarm:
            continue  # a stack frame, or a warning whose numbers rise (ports, retries): no progress
        if "0" in key:
            numbers[key].append([float(x) for x in _NUMBER.findall(_clock().sub(" ", msg))])
    out = set()
    for key, rows in numbers.items():
        if len(rows) < PROGRESS_MIN:
            continue
        width = min(len(r) for r in rows)
        for j in range(width):
            col = [r[j] for r in rows]
            ups = sum(1 for a, b in zip(col, col[1:], strict=False) if b > a)
            downs = sum(1 for a, b in zip(col, col[1:], strict=False) if b < a)
            if ups >= PROGRESS_MIN - 1 and downs <= max(1, ups // 4):
                out.add(key)
                break
    return out


def _stage_by_time(parsed: ParsedJob, eid: int, markers: dict[int, str]) -> tuple[str, int] | None:
    """(stage, marker template) of the marker seen last before the event, by timestamps across all
    ranks; None when the event or the markers carry no timestamps, or no marker comes before it."""
    t = parsed.templates[eid].first_seen
    if t is None:
        return None
    best: tuple[str, str, int] | None = None
    for mid, stage in markers.items():
        m = parsed.templates[mid]
        if mid == eid or m.first_seen is None or m.first_seen > t:
            continue
        at = min(m.last_seen or m.first_seen, t)
        if best is None or at > best[0]:
            best = (at, stage, mid)
    return (best[1], best[2]) if best else None


def _stage_before(pos: dict[int, tuple[int, int]], p: int, markers: dict[int, str], eid: int) -> str | None:
    best: tuple[float, int, str] | None = None
    for mid, stage in markers.items():
        if mid == eid or mid not in pos:
            continue
        first, last = pos[mid]
        if first >= p:
            continue
        at = last if last < p else p - 0.5  # still ongoing when the event appeared
        key = (at, 1 if stage == "training" else 0, stage)
        if best is None or key > best:
            best = key
    return best[2] if best else None
