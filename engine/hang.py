"""Hang evidence beside the logs: flight-recorder dumps and stack dumps, joined into one finding.

`collect_hang` reads the job folder's dumps (`engine.flightrec`, aligned by `engine.collectives`) and
stack dumps (`engine.stacks`: py-spy files, and faulthandler blocks inside the rank logs when the
logs speak of a timeout), maps ranks to nodes (rank-file names, the dump's folder or host name),
and names the culprit ranks: the flight recorder's verdict first, the stack outliers where the
dumps name no one. `raise_culprits` moves the culprits' nodes up in the node ranking:

- named by the flight recorder (a rank that never reached the collective, or enqueued another op,
  size or dtype): score at least `flight_recorder_score` (0.95);
- a stack outlier only: at least `stack_outlier_score` (0.85);
- only "wrote no dump" (dead or stopped): at least `missing_dump_score` (0.75);

each plus 0.01 where the stack dumps single the node out too, so that these nodes stand above any node
the logs alone rank higher: a dump is direct evidence of who did not join, log statistics are not.
The weights are data (`engine/data/hang.yaml`, `fusion`).
"""
from __future__ import annotations

from pathlib import Path

from engine.collectives import Verdict, analyze_dumps
from engine.flightrec import read_dumps
from engine.hangfiles import UnreadableDump, find_hang_files, read_capped
from engine.model import HangFinding, NodeFinding, ParsedJob, StackGroup
from engine.peers import rank_nodes_map, rank_of_file
from engine.rules import compiled, load
from engine.stacks import Stack, group_stacks, parse_faulthandler, parse_pyspy


def _rank_of(path: Path) -> int | None:
    rank = rank_of_file(path.name)
    if rank is not None:
        return rank
    m = compiled(r"(\d{1,6})(?:\.[A-Za-z]+)*$").search(path.name)
    return int(m.group(1)) if m else None


def _file_stacks(paths: list[Path], unreadable: list[str]) -> list[Stack]:
    cap = load("hang")["stacks"]["max_bytes"]
    out = []
    for path in paths:
        rank = _rank_of(path)
        try:
            text = read_capped(path, cap, "stack dump").decode("utf-8", "replace")
        except UnreadableDump as exc:
            unreadable.append(f"{path}: {exc}")
            continue
        if rank is None:
            unreadable.append(f"{path}: stack dump whose rank is unknown (name it rank-<N>.pyspy)")
            continue
        frames = parse_pyspy(text) if "Thread " in text and "(most recent call first)" not in text \
            else parse_faulthandler(text.splitlines())
        if frames:
            out.append(Stack(rank=rank, frames=frames, source=str(path)))
    return out


def _log_stacks(parsed: ParsedJob, have: set[int]) -> list[Stack]:
    """The faulthandler dumps of the rank logs (read in the scan pass, `engine.logstacks`), one per rank
    that no stack-dump file already covers."""
    out = []
    for path, frames in sorted(parsed.fault_frames.items()):
        rank = _rank_of(Path(path))
        if rank is None or rank in have or not frames:
            continue
        out.append(Stack(rank=rank, frames=list(frames), source=path))
    return out


def _timeouts_logged(parsed: ParsedJob) -> bool:
    rule = compiled(load("hang")["stacks"]["scan_logs_when"])
    return any(rule.search(t.template) for t in parsed.templates)


def collect_hang(parsed: ParsedJob, root: Path | str | None = None) -> HangFinding | None:
    """The hang evidence of the job folder `root` (default: the parsed job's own folder), or None
    when it has neither dumps nor stack dumps. Unusable dumps are added to the job's
    `stats.unreadable_files` (one line each, "path: reason") and the rest is used."""
    root = Path(root or parsed.root) if (root or parsed.root) else None
    if root is None or not root.is_dir():
        return None
    files = find_hang_files(root)
    unreadable: list[str] = []
    dumps, bad = read_dumps(files.dumps)
    unreadable += bad
    stacks = _file_stacks(files.stacks, unreadable)
    if dumps or stacks or _timeouts_logged(parsed):
        stacks += _log_stacks(parsed, {s.rank for s in stacks})
    parsed.stats.unreadable_files.extend(u for u in unreadable if u not in parsed.stats.unreadable_files)
    if not dumps and not stacks:
        return None
    nodes = rank_nodes_map(parsed)
    for d in dumps:
        node = d.host or _dump_folder_node(Path(d.path), root)
        if node and d.rank not in nodes:
            nodes[d.rank] = node
    verdict = analyze_dumps(dumps) if dumps else None
    groups = group_stacks(stacks)
    return _finding(verdict, groups, nodes, len(dumps), len(stacks))


def _dump_folder_node(path: Path, root: Path) -> str | None:
    rel = path.relative_to(root)
    folders = set(load("hang")["flight_recorder"]["folders"]) | set(load("hang")["stacks"]["folders"])
    return rel.parts[0] if len(rel.parts) > 1 and rel.parts[0] not in folders else None


def _names(ranks: list[int], nodes: dict[int, str]) -> str:
    shown = [f"rank {r}" + (f" ({nodes[r]})" if r in nodes else "") for r in ranks[:4]]
    more = f" and {len(ranks) - 4} more" if len(ranks) > 4 else ""
    return ", ".join(shown) + more


def _finding(verdict: Verdict | None, groups: list, nodes: dict[int, str], n_dumps: int,
             n_stacks: int) -> HangFinding:
    stack_groups = [StackGroup(frames=g.frames[:8], ranks=g.ranks,
                               nodes=sorted({nodes[r] for r in g.ranks if r in nodes}), outlier=g.outlier)
                    for g in groups]
    outliers = sorted(r for g in groups if g.outlier for r in g.ranks)
    sources = (["flight_recorder"] if n_dumps else []) + (["stacks"] if n_stacks else [])
    f = HangFinding(summary="", sources=sources, stack_groups=stack_groups, dumps=n_dumps, stacks=n_stacks)
    if verdict is not None:
        f.kind, f.process_group, f.collective = verdict.kind, verdict.process_group, verdict.collective
        f.sequence_id, f.ranks, f.detail = verdict.sequence_id, list(verdict.culprits), verdict.detail
        f.ranks_without_dump, f.waiting_ranks = verdict.ranks_without_dump, verdict.waiting
        f.last_sequence = {str(r): s for r, s in sorted(verdict.last_sequence.items())}
    if not f.ranks and outliers:
        f.kind = f.kind if f.kind == "all_waiting" else "stack_outlier"
        f.ranks = outliers
    f.nodes = sorted({nodes[r] for r in f.ranks if r in nodes}, key=lambda n: min(
        r for r in f.ranks if nodes.get(r) == n))
    f.summary = _summary(f, nodes, outliers, groups)
    return f


def _summary(f: HangFinding, nodes: dict[int, str], outliers: list[int], groups: list) -> str:
    op = f"{f.collective} #{f.sequence_id} of process group {f.process_group}" if f.collective else ""
    who = _names(f.ranks, nodes)
    waiting = f"{len(f.waiting_ranks)} ranks wait in it" if f.waiting_ranks else ""
    if f.kind == "missing":
        text = f"{who} never reached {op}; {waiting}"
    elif f.kind == "mismatch":
        text = f"{who} desynced at {op}: {f.detail}"
    elif f.kind == "no_dump":
        others = f"{len(f.waiting_ranks)} ranks wait" if f.waiting_ranks else "the others wait"
        text = f"{who} wrote no flight-recorder dump (dead or stopped) while {others} in {op}"
    elif f.kind == "not_started":
        text = f"{who} never started {op}; {waiting}"
    elif f.kind == "stack_outlier":
        text = f"stack dumps: {who} stand apart from the {len(groups[0].ranks)} ranks in " \
               f"{groups[0].frames[0] if groups[0].frames else '?'}"
    elif f.kind == "all_waiting":
        text = f"every rank waits in {op}; the dumps name no rank"
    else:
        text = "hang evidence without a verdict"
    if outliers and f.kind not in ("stack_outlier",):
        same = set(outliers) == set(f.ranks)
        text += f"; stack dumps {'agree' if same else 'single out ' + _names(outliers, nodes)}"
    return text


def raise_culprits(nodes: list[NodeFinding], finding: HangFinding | None, *, top_k: int) -> list[NodeFinding]:
    """The node ranking with the culprits' nodes moved up as the module docstring says."""
    if finding is None or not finding.nodes:
        return nodes
    weights = load("hang")["fusion"]
    base = (weights["missing_dump_score"] if finding.kind == "no_dump"
            else weights["stack_outlier_score"] if finding.kind == "stack_outlier"
            else weights["flight_recorder_score"])
    by_node = {n.node: n for n in nodes}
    singled = {n for g in finding.stack_groups if g.outlier for n in g.nodes}
    for node in finding.nodes:
        score = min(1.0, base + (0.01 if node in singled else 0.0))
        hit = by_node.get(node)
        if hit is None:
            by_node[node] = NodeFinding(node=node, score=round(score, 4), events=[])
        elif hit.score < score:
            hit.score = round(score, 4)
    ranked = sorted(by_node.values(), key=lambda n: (-n.score, n.node))
    return ranked[:max(top_k, len(finding.nodes))]
