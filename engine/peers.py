"""Peer blame: which node do the other ranks' timeouts point at?

A hung or dead rank logs nothing, while its peers time out and often *name* it ("The Notify
register has not received the Notify record from remote rank: [12]"). The example lines of the
failure-indicating events are searched with the rules of `engine/data/peers.yaml`; every named
rank is mapped to its node through the rank files' names, and a node named by at least
MIN_VOTES lines gets a score in (0, 1], relative to the most named node.

The launcher blames a rank too: when a worker ignores the SIGTERM of the teardown it is killed
("Unable to shutdown process 2357 via 15, forcefully exiting via 9"): a stopped or hung process,
on the node of the launcher that says so (`unresponsive` rules).

And a failure line may name a *host* of the job: the launcher that cannot reach a node ("ssh: connect
to host hpc-a100-188 port 22: Connection timed out", Open MPI's "Remote daemon: … on node X"), a peer
that lost one ("Connection to worker-3 lost"). A node of the job named, as a whole word and not as a
path's part, by a possible root cause logged on other nodes only is blamed (`named_hosts`).
"""
from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable

from engine.model import ParsedJob
from engine.rules import compiled, load

MIN_VOTES = 2


def rank_of_file(name: str) -> int | None:
    """The global rank a rank file's name gives (rank-0012.log, rank_12.out, worker-rank12.log)."""
    for p in load("peers")["rank_of_file"]:
        m = compiled(p).search(name)
        if m:
            return int(m.group("rank"))
    return None


def rank_nodes_map(parsed: ParsedJob) -> dict[int, str]:
    """Global rank -> node, from the rank files' names (ranks named twice on two nodes are dropped)."""
    found: dict[int, set[str]] = {}
    for path, node in parsed.file_nodes.items():
        rank = rank_of_file(os.path.basename(path))
        if rank is not None:
            found.setdefault(rank, set()).add(node)
    return {rank: next(iter(nodes)) for rank, nodes in found.items() if len(nodes) == 1}


def named_ranks(lines: Iterable[str]) -> Counter[int]:
    """How often each rank is named as the peer in `lines`."""
    rules = [compiled(p) for p in load("peers")["rank_in_message"]]
    votes: Counter[int] = Counter()
    for line in lines:
        for rx in rules:
            m = rx.search(line)
            if m:
                votes[int(m.group("rank"))] += 1
                break
    return votes


def blamed_nodes(parsed: ParsedJob, event_ids: Iterable[int]) -> dict[str, float]:
    """Node -> blame in (0, 1] from the example lines of the events `event_ids`."""
    votes = named_ranks(line for e in event_ids for line in parsed.templates[e].examples)
    if not votes:
        return {}
    where = rank_nodes_map(parsed)
    per_node: Counter[str] = Counter()
    for rank, n in votes.items():
        if rank in where:
            per_node[where[rank]] += n
    top = max(per_node.values(), default=0)
    return {node: n / top for node, n in per_node.items() if n >= MIN_VOTES}


def unresponsive_nodes(parsed: ParsedJob, event_ids: Iterable[int]) -> dict[str, float]:
    """Node -> 1.0 for the nodes whose launcher had to kill a worker that ignored its SIGTERM, when
    that is not every node (then it says nothing about one of them)."""
    rules = [compiled(p) for p in load("peers").get("unresponsive", [])]
    found: set[str] = set()
    for e in event_ids:
        t = parsed.templates[e]
        if any(rx.search(x) for rx in rules for x in (t.template, *t.examples)):
            found |= set(t.nodes)
    return {n: 1.0 for n in found} if found and len(found) < len(parsed.node_counts) else {}


def _host_like(node: str) -> bool:
    """A node name a message could name without meaning something else: a letter and a digit, 4+ chars
    (hpc-a100-188, algo-2, ip-10-1-2-3, gpu-node-02; not "0" or "master")."""
    return len(node) >= 4 and any(c.isalpha() for c in node) and any(c.isdigit() for c in node)


def named_hosts(parsed: ParsedJob, event_ids: Iterable[int]) -> dict[str, float]:
    """Node -> blame in (0, 1]: the job's nodes named by the example lines of the events `event_ids`
    that were logged on other nodes (a node naming itself blames nobody), relative to the most named
    node; nothing when every node is named (a host list, not a blame)."""
    nodes = [n for n in parsed.node_counts if _host_like(n)]
    if len(parsed.node_counts) < 2 or not nodes:
        return {}
    alt = "|".join(re.escape(n) for n in sorted(nodes, key=len, reverse=True))
    rx = re.compile(rf"(?<![\w./-])({alt})(?![\w/-])")
    votes: Counter[str] = Counter()
    for e in event_ids:
        t = parsed.templates[e]
        named = {m.group(1) for line in t.examples for m in rx.finditer(line)} - set(t.nodes)
        votes.update(named)
    if not votes or len(votes) >= len(parsed.node_counts):
        return {}
    top = max(votes.values())
    return {node: n / top for node, n in votes.items()}
