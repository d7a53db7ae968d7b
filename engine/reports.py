"""One fault report, shown together: lines a known signature names alike, close together in a file.

A failure is often told in several lines of different shapes that a fault library names with one
signature: a data-loader worker's "ERROR: Unexpected bus error encountered in worker" and the main
process's "DataLoader worker (pid N) is killed by signal: Bus error" a few lines later; a CUDA kernel's
"Assertion `t >= 0` failed" beside "CUDA error: device-side assert triggered"; ProcessGroupNCCL's
watchdog timeout and its "Some NCCL operations have failed or timed out" right after; the kernel's
"invoked oom-killer" and "Out of memory: Killed process" of one OOM report. Ranked apart, the one that
shows the origin may come second (equal weights are broken by whichever template came first). So
the group's best event — its most severe possible root cause, else its most severe echo — shows the
group's lines first, in the order the file logged them. The other lines stay events of their own
(dropping them was tried: per-event precision counts one correct event where there were several).

Only a report told on few nodes is grouped (at most a quarter of them: a cascade every rank logs stays
as it is). Only the signature ids (`engine.known`, from the caller's library) and the lines' places in
their files are read (`ParsedJob.positions`, each event's first and last line per file). With no
signatures nothing is grouped.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from engine.model import ParsedJob

NEAR_LINES = 12  # lines of one report lie at most this far apart in their file
LOCAL_SHARE = 4  # a report is told on at most a quarter of the nodes (a cascade everywhere stays apart)
MAX_SHOWN = 3  # an event shows at most this many lines (CONTRACTS: examples)


def _gap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return min(abs(x - y) for x in a for y in b)


def report_groups(parsed: ParsedJob, candidates: Sequence[int], known_of: Mapping[int, str],
                  severity: Mapping[int, float], roles: Mapping[int, str] | None = None
                  ) -> dict[int, list[int]]:
    """Keeper -> the group's events in the order their lines stand in the file that joined them
    (the keeper among them), for every group of at least two candidates that match the same known
    signature within NEAR_LINES of each other in some file. The keeper is the group's most severe
    possible root cause (an event `roles` gives no role), else its most severe echo (ties: the one
    logged first)."""
    roles = roles or {}
    local = max(1, len(parsed.node_counts) // LOCAL_SHARE)
    named = [i for i in candidates if i in known_of and len(parsed.templates[i].nodes) <= local]
    if len(named) < 2:
        return {}
    parent = {i: i for i in named}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    place: dict[int, tuple[int, int]] = {}  # event -> (file order, line) where it was first grouped
    for k, pos in enumerate(parsed.positions.values()):
        here = sorted((i for i in named if i in pos), key=lambda i: pos[i][0])
        for a_at, a in enumerate(here):
            for b in here[a_at + 1:]:
                if known_of[a] == known_of[b] and _gap(pos[a], pos[b]) <= NEAR_LINES:
                    place.setdefault(a, (k, pos[a][0]))
                    place.setdefault(b, (k, pos[b][0]))
                    parent[find(b)] = find(a)
    groups: dict[int, list[int]] = {}
    for i in place:
        groups.setdefault(find(i), []).append(i)
    out = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        members.sort(key=lambda i: place[i])
        keeper = min(members, key=lambda i: (i in roles, -severity.get(i, 0.0), place[i]))
        out[keeper] = members
    return out


def shown_lines(parsed: ParsedJob, members: Sequence[int], evidence: Sequence[str] = ()) -> list[str]:
    """The lines a group's event shows first: `evidence` it had, then one line of each member."""
    lines = list(evidence)
    for i in members:
        t = parsed.templates[i]
        if t.examples and t.examples[0] not in lines:
            lines.append(t.examples[0])
    return lines[:MAX_SHOWN]
