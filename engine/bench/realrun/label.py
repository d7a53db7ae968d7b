"""Labels of a failed run, found after it in the lines it really wrote (nothing is assumed about wording
beyond the kind's root patterns in ``kinds.yaml``).

Root lines: the message of the injected fault and its traceback, where the kind says they show
(the faulty ranks, the faulty node's launcher, the other ranks' collective timeouts, every launcher).
Context: the faulty ranks' other traceback lines. Cascade: every other rank's tracebacks, the
launchers' own tracebacks and failure summaries, and any line matching a consequence pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from engine.bench.realrun.layout import LINE_PREFIX, SRUN_PREFIX, LogFile, is_slurm
from engine.bench.realrun.plan import NPROC, RunPlan, kind_spec, kinds

RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")  # torch's prefix of an uncaught exception's lines
FRAME = re.compile(r"^\s")
CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
# torchrun's agent (LOGLEVEL=INFO) before it starts the workers again (--max-restarts): what the ranks
# write after it on that node is a later attempt
RESTART = re.compile(r"will restart worker group")
ATTEMPT_DIR = re.compile(r"/attempt_(\d+)/")

Stream = tuple[str, int | None]  # (node, local rank; None = the node's launcher)


@dataclass
class Line:
    text: str  # the raw line as written to the file
    body: str  # without the launcher's and torch's rank prefixes
    stream: Stream
    block: int | None = None  # traceback block id
    exc: bool = False  # the exception line that ends its block
    attempt: int = 0  # torchrun's restart count of the workers that wrote it


def body_of(raw: str, console: bool = True) -> str:
    """The line without the launcher's prefix (a console's ``[defaultN]:``/``[rankN]:``) and torch's."""
    s = LINE_PREFIX.sub("", raw, count=1) if console else raw
    return RANK_PREFIX.sub("", s, count=1)


def _lines(files: Iterable[LogFile]) -> list[list[Line]]:
    """Per file and stream, the lines in order, with traceback blocks marked."""
    out = []
    block_id = 0
    for f in files:
        per_stream: dict[Stream, list[Line]] = {}
        console = f.rel.endswith("/torchrun.log")  # rank files and launcher.log carry no launcher prefix
        srun = is_slurm(f.rel)  # srun -l's "N: " on the ranks' lines
        in_dir = ATTEMPT_DIR.search(f.rel)
        attempt = int(in_dir[1]) if in_dir else 0
        for raw, local in zip(f.lines, f.locals, strict=True):
            key = (f.node, local)
            if srun and local is not None:
                body = RANK_PREFIX.sub("", SRUN_PREFIX.sub("", raw, count=1), count=1)
            else:
                body = body_of(raw, console)
            per_stream.setdefault(key, []).append(Line(raw, body, key, attempt=attempt))
            if local is None and not in_dir and RESTART.search(raw):
                attempt += 1
        for seq in per_stream.values():
            open_block = None
            for ln in seq:
                if "Traceback (most recent call last)" in ln.body:  # may follow a tqdm bar's \r updates
                    block_id += 1
                    open_block = block_id
                    ln.block = open_block
                elif open_block is not None and (FRAME.match(ln.body) or not ln.body.strip()):
                    ln.block = open_block
                elif open_block is not None:
                    ln.block, ln.exc = open_block, True
                    open_block = None
            out.append(seq)
    return out


def faulty_streams(plan: RunPlan, ranks: dict[tuple[str, int], dict]) -> set[Stream]:
    if plan.kind is None or plan.fault_node is None:
        return set()
    if plan.scope == "all":
        return {(n, loc) for n in plan.nodes for loc in range(NPROC)}
    if plan.scope == "rank0":
        return {(n, loc) for (n, loc), info in ranks.items() if int(info["rank"]) == 0}
    return {(plan.nodes[plan.fault_node], loc) for loc in plan.fault_locals}


def label(plan: RunPlan, files: list[LogFile], ranks: dict[tuple[str, int], dict]) -> dict:
    """The truth keys of a failed run: indicating, root_lines, cascade_lines, context_lines."""
    spec = kind_spec(plan.kind or "")
    pats = [re.compile(p) for p in spec["root_patterns"]]
    also = [re.compile(p) for p in spec.get("also", [])]
    cascade_pats = [re.compile(p) for p in kinds()["cascade"]]
    faulty = faulty_streams(plan, ranks)
    fnode = plan.nodes[plan.fault_node] if plan.fault_node is not None else None
    mode = spec["root"]

    def root_stream(s: Stream) -> bool:
        if mode == "rank":
            return s in faulty or (spec.get("root_also_agent", False) and s == (fnode, None))
        if mode == "agent":
            return s == (fnode, None)
        if mode == "node":
            return s[0] == fnode
        if mode == "ranks":
            return s[1] is not None
        if mode == "peers":
            return s[1] is not None and s not in faulty
        return s[1] is None  # agents

    seqs = _lines(files)
    blocks: dict[int, list[Line]] = {}
    for seq in seqs:
        for ln in seq:
            if ln.block is not None:
                blocks.setdefault(ln.block, []).append(ln)
    root: list[Line] = []
    recurred: list[Line] = []  # the fault again in a restarted attempt: context (the first attempt's is root)
    for seq in seqs:
        for ln in seq:
            if not root_stream(ln.stream) or (ln.block is not None and not ln.exc) \
                    or not any(p.search(ln.body) for p in pats):
                continue
            found = blocks[ln.block] if ln.block is not None and ln.exc else [ln]
            (root if ln.attempt == 0 else recurred).extend(found)
    ind = [ln for ln in root if ln.block is None or ln.exc]
    also_all = [ln for seq in seqs for ln in seq if ln.stream[1] is not None
                and any(p.search(ln.body) for p in also)]
    also_lines = [ln for ln in also_all if ln.attempt == 0]
    recurred += [ln for ln in also_all if ln.attempt > 0]
    root_set = {id(x) for x in root + also_lines}
    context: list[Line] = list(recurred)
    recurred_set = {id(x) for x in recurred}
    cascade: list[Line] = []
    for seq in seqs:
        in_summary = seen_root_cause = False  # inside torchrun's ChildFailedError summary
        for ln in seq:
            if ln.stream[1] is None and "ChildFailedError" in ln.body:
                in_summary, seen_root_cause = True, False
            if id(ln) not in root_set and id(ln) not in recurred_set:
                if ln.stream in faulty and (ln.block is not None or ln.body.startswith(CHAIN)):
                    context.append(ln)
                elif in_summary or ln.block is not None or any(p.search(ln.body) for p in cascade_pats):
                    cascade.append(ln)
            if in_summary and "Root Cause" in ln.body:
                seen_root_cause = True
            elif in_summary and seen_root_cause and ln.body.startswith("===="):
                in_summary = False
    return {
        "indicating": [{"key": plan.kind, "lines": _texts(ind + also_lines)}] if ind or also_lines else [],
        "root_lines": _texts(root + also_lines),
        "cascade_lines": _texts(cascade, exclude=_texts(root + also_lines)),
        "context_lines": _texts(context, exclude=_texts(root + also_lines)),
    }


def _texts(lines: Iterable[Line], exclude: Iterable[str] = ()) -> list[str]:
    seen = set(exclude)
    out = []
    for ln in lines:
        if ln.text.strip() and ln.text not in seen:
            seen.add(ln.text)
            out.append(ln.text)
    return out
