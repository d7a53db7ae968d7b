"""Which rank held up a collective: the ranks' flight-recorder dumps, aligned by sequence id.

Per process group, every rank's entries are aligned by `collective_seq_id` (point-to-point ops by
`p2p_seq_id`). Ring buffers that wrapped are compared only over the window all ranks still hold.
The verdict, in this order:

1. **mismatch**: the first sequence id where ranks enqueued different ops, sizes or dtypes; the
   minority ranks are the culprits (a desync).
2. **missing**: ranks that never reached a collective others are waiting in. A laggard that is
   itself waiting in a collective of another process group is followed to who holds *that* one up,
   so the root is a rank that is not inside any collective at all.
3. **no dump**: members of the group that wrote no dump while the others wait (a dead or stopped
   process cannot dump).
4. **not started** (NCCL states): every rank enqueued the collective, some started it, these never did.
5. **all waiting**: every rank is inside the same collective and none is behind: the dumps name no
   rank (the network, or a rank outside these dumps).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from engine.flightrec import FRDump, FREntry


@dataclass
class Verdict:
    kind: str  # mismatch | missing | no_dump | not_started | all_waiting
    process_group: str
    collective: str | None
    sequence_id: int | None
    culprits: list[int]
    ranks_without_dump: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)  # ranks inside the collective, waiting
    last_sequence: dict[int, int] = field(default_factory=dict)  # rank -> last seq id enqueued
    detail: str = ""  # what differs, for a mismatch


def _members(dumps: list[FRDump]) -> dict[str, set[int]]:
    """Process group name -> its ranks: from pg_config where it names the group, else the ranks that
    logged entries of it; the default group ('0', or any described as default_pg) has every rank."""
    world = set()
    for d in dumps:
        for ranks in d.pg_ranks.values():
            world |= set(ranks)
        world.add(d.rank)
    members: dict[str, set[int]] = {}
    for d in dumps:
        for e in d.entries:
            group = members.setdefault(e.pg_name, set())
            group.add(d.rank)
            configured = d.pg_ranks.get(e.pg_name)
            if configured:
                group |= set(configured)
            elif e.pg_name == "0" or e.pg_desc == "default_pg":
                group |= world
    return members


def _completed(dump: FRDump, e: FREntry) -> bool:
    status = dump.pg_status.get(e.pg_name) or {}
    last = status.get("last_completed_collective")
    return (e.state == "completed" or e.retired
            or (isinstance(last, int) and not e.is_p2p and e.collective_seq_id <= last))


def _seq(e: FREntry) -> int:
    return e.p2p_seq_id if e.is_p2p else e.collective_seq_id


def _key(e: FREntry) -> tuple[str, bool]:
    return e.pg_name, e.is_p2p


def _signature(e: FREntry) -> tuple:
    return e.op, repr(e.input_sizes), repr(e.input_dtypes)


def analyze_dumps(dumps: list[FRDump]) -> Verdict | None:
    """The dumps' verdict on who held the job up, or None when they hold no entries."""
    if not any(d.entries for d in dumps):
        return None
    by_rank = {d.rank: d for d in dumps}
    members = _members(dumps)
    # (pg, p2p) -> rank -> seq -> entry
    table: dict[tuple[str, bool], dict[int, dict[int, FREntry]]] = {}
    for d in dumps:
        for e in d.entries:
            table.setdefault(_key(e), {}).setdefault(d.rank, {})[_seq(e)] = e
    return (_mismatch(table) or _missing(table, members, by_rank) or _no_dump(table, members, by_rank)
            or _not_started(table, by_rank) or _all_waiting(table, by_rank))


def _last(table: dict, key: tuple[str, bool]) -> dict[int, int]:
    return {r: max(seqs) for r, seqs in table[key].items() if seqs}


def _mismatch(table: dict) -> Verdict | None:
    found: list[tuple[int, str, Verdict]] = []
    for key, ranks in table.items():
        if len(ranks) < 2:
            continue
        start = max(min(seqs) for seqs in ranks.values())  # the window every rank still holds
        common = set.union(*(set(s) for s in ranks.values()))
        for seq in sorted(s for s in common if s >= start):
            have = {r: seqs[seq] for r, seqs in ranks.items() if seq in seqs}
            sigs = Counter(_signature(e) for e in have.values())
            if len(have) < 2 or len(sigs) < 2:
                continue
            major, _ = sigs.most_common(1)[0]
            odd = sorted(r for r, e in have.items() if _signature(e) != major)
            if len(odd) * 2 > len(have):
                continue  # no majority to call the others odd
            sample = have[odd[0]]
            what = ("op" if sample.op != major[0] else "size" if repr(sample.input_sizes) != major[1]
                    else "dtype")
            verdict = Verdict(
                kind="mismatch", process_group=key[0], collective=major[0], sequence_id=seq, culprits=odd,
                waiting=sorted(r for r in have if r not in odd), last_sequence=_last(table, key),
                detail=(f"{what} mismatch: rank {odd[0]} enqueued {sample.op} {sample.input_sizes} "
                        f"{sample.input_dtypes} where {len(have) - len(odd)} ranks enqueued {major[0]} "
                        f"{major[1]} {major[2]}"))
            found.append((seq, key[0], verdict))
            break
    return min(found, key=lambda x: (x[0], x[1]))[2] if found else None


def _pending(dump: FRDump) -> FREntry | None:
    """The collective a rank is inside of: its newest entry, when not completed."""
    if not dump.entries:
        return None
    newest = max(dump.entries, key=lambda e: (e.time_created_ns or 0, e.record_id))
    return None if _completed(dump, newest) else newest


def _missing(table: dict, members: dict[str, set[int]], by_rank: dict[int, FRDump]) -> Verdict | None:
    lag: dict[tuple[str, bool], tuple[int, list[int]]] = {}  # key -> (first seq not reached, laggards)
    for key, ranks in table.items():
        last = _last(table, key)
        dumped_members = [r for r in members.get(key[0], set(ranks)) if r in by_rank]
        top = max(last.values())
        behind = sorted(r for r in dumped_members if last.get(r, -1) < top)
        if behind:
            lag[key] = (min(last.get(r, -1) for r in behind) + 1, behind)
    if not lag:
        return None

    def blockers(rank: int, seen: set[int]) -> set[int]:
        """The ranks that hold `rank` up: itself when it is inside no collective."""
        if rank in seen:
            return set()
        seen.add(rank)
        pending = _pending(by_rank[rank])
        if pending is None:
            return {rank}
        key = _key(pending)
        seq = _seq(pending)
        ahead = [r for r, seqs in table.get(key, {}).items() if r != rank and seq in seqs]
        held = [r for r in members.get(key[0], set()) if r in by_rank and r != rank and r not in ahead
                and max(table.get(key, {}).get(r, {-1: None})) < seq]
        roots: set[int] = set()
        for r in held:
            roots |= blockers(r, seen)
        return roots

    best: tuple | None = None
    for key, (seq, behind) in lag.items():
        roots: set[int] = set()
        for r in behind:
            roots |= blockers(r, set())
        culprits = sorted(roots) or behind
        ranks = table[key]
        op = next((seqs[seq].op for seqs in ranks.values() if seq in seqs), None)
        cand = (0 if roots else 1, len(culprits), seq, key[0])
        if best is None or cand < best[0]:
            waiting = sorted(r for r, seqs in ranks.items() if seq in seqs)
            best = (cand, Verdict(kind="missing", process_group=key[0], collective=op, sequence_id=seq,
                                  culprits=culprits, waiting=waiting, last_sequence=_last(table, key)))
    return best[1] if best else None


def _no_dump(table: dict, members: dict[str, set[int]], by_rank: dict[int, FRDump]) -> Verdict | None:
    for key in sorted(table, key=lambda k: (k[0] != "0", k)):
        absent = sorted(r for r in members.get(key[0], set()) if r not in by_rank)
        if not absent:
            continue
        last = _last(table, key)
        seq = max(last.values())
        op = next((seqs[seq].op for seqs in table[key].values() if seq in seqs), None)
        return Verdict(kind="no_dump", process_group=key[0], collective=op, sequence_id=seq, culprits=absent,
                       ranks_without_dump=absent, waiting=sorted(last), last_sequence=last)
    return None


def _not_started(table: dict, by_rank: dict[int, FRDump]) -> Verdict | None:
    for key, ranks in table.items():
        seq = max(max(s) for s in ranks.values())
        states = {r: seqs[seq].state for r, seqs in ranks.items() if seq in seqs}
        started = [r for r, s in states.items() if s in ("started", "completed")]
        idle = sorted(r for r, s in states.items() if s == "scheduled")
        if started and idle and len(idle) * 2 <= len(states):
            op = ranks[idle[0]][seq].op
            return Verdict(kind="not_started", process_group=key[0], collective=op, sequence_id=seq,
                           culprits=idle, waiting=sorted(started), last_sequence=_last(table, key))
    return None


def _all_waiting(table: dict, by_rank: dict[int, FRDump]) -> Verdict | None:
    for key, ranks in sorted(table.items()):
        seq = max(max(s) for s in ranks.values())
        waiting = sorted(r for r, seqs in ranks.items()
                         if seq in seqs and not _completed(by_rank[r], seqs[seq]))
        if waiting:
            return Verdict(kind="all_waiting", process_group=key[0], collective=ranks[waiting[0]][seq].op,
                           sequence_id=seq, culprits=[], waiting=waiting, last_sequence=_last(table, key))
    return None
