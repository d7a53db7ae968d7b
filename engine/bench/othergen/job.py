"""One generated job of the outsider generator: its nodes and ranks, the lines each rank file gets, and
writing them in CONTRACTS §1's layout (`<node>/<rank file>`, stdout and stderr per rank, a kernel log
per node, Ascend plog files; optionally gzip'd)."""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from engine.bench.othergen.templates import clock, load, randoms, render, stamps

BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
ROLES = ("root", "context", "cascade")


@dataclass
class Rank:
    rank: int
    local: int
    node: int
    pid: int
    tid: int
    agent_pid: int


@dataclass
class Node:
    host: str
    ip: str
    skew: float  # seconds this node's clock is off
    uptime0: float  # seconds the machine was up when the job started
    ranks: list[Rank] = field(default_factory=list)


@dataclass
class Record:
    t: float
    order: int
    text: str
    nl: bool = True  # False: a tqdm-style update that ends with no newline
    role: str | None = None  # root | context | cascade | None (normal output)
    key: str | None = None


class Job:
    """The files of one job as records in time; `emit` renders template lines onto rank files."""

    def __init__(self, rng: random.Random, family: str, nodes: int, per_node: int, start: datetime,
                 utc_offset_h: int, job_ctx: dict, hosts: list[str], skewed: int | None, skew_s: float):
        self.rng = rng
        self.family = family
        self.fam = load("families")["families"][family]
        self.start = start
        self.utc_offset_h = utc_offset_h
        self.files: dict[tuple[str, str], list[Record]] = {}
        self._order = 0
        self.nodes: list[Node] = []
        for n in range(nodes):
            node = Node(host=hosts[n], ip=render(self.fam["ip"], {**randoms(rng), "n": n + 11}),
                        skew=skew_s if n == skewed else 0.0, uptime0=rng.uniform(2e3, 4e6))
            agent_pid = rng.randint(1000, 90000)
            for local in range(per_node):
                pid = rng.randint(10000, 4000000)
                node.ranks.append(Rank(rank=n * per_node + local, local=local, node=n, pid=pid,
                                       tid=pid + rng.randint(5, 3000), agent_pid=agent_pid))
            self.nodes.append(node)
        self.world = nodes * per_node
        self.ctx = {**job_ctx, "world": self.world, "nnodes": nodes, "nproc": per_node,
                    "master_ip": self.nodes[0].ip}
        self.ranks = [r for node in self.nodes for r in node.ranks]
        for r in self.ranks:  # a collector keeps both files of a rank, empty or not
            for stream in ("stdout", "stderr"):
                self.files.setdefault(self.file_of(r, stream), [])

    # ---- addressing ------------------------------------------------------------------------------
    def rank_ctx(self, r: Rank, t: float, extra: dict | None = None) -> dict:
        node = self.nodes[r.node]
        local_time = clock(self.start, self.utc_offset_h, node.skew, t)
        return {
            **self.ctx, **randoms(self.rng),
            **stamps(local_time, self.utc_offset_h, node.uptime0 + t, self.rng),
            "rank": r.rank, "local": r.local, "node": node.host, "host": node.host, "ip": node.ip,
            "pid": r.pid, "tid": r.tid, "agent_pid": r.agent_pid, "dev": r.local,
            "bus": BUSES[r.local % len(BUSES)], "plogid": self.ctx["plog_prefix"] + str(r.rank),
            **(extra or {}),
        }

    def file_of(self, r: Rank, stream: str) -> tuple[str, str]:
        """(node folder, file name) of rank `r`'s `stream` (stdout, stderr, plog, kernel)."""
        node = self.nodes[r.node]
        if stream == "kernel":
            kern = self.fam["kernel"]
            if kern.get("merge"):
                return self.file_of(node.ranks[0], "stderr")
            return node.host, kern["file"]
        if stream == "plog":
            name = self.fam.get("plog")
            if not name:
                return self.file_of(r, "stderr")
            return node.host, render(name, {"pid": r.pid, "plogid": self.ctx["plog_prefix"] + str(r.rank)})
        return node.host, render(self.fam["files"][stream], {**self.ctx, "rank": r.rank, "local": r.local})

    def select(self, who: str, faulty: Rank | None = None, chosen: list[Rank] | None = None) -> list[Rank]:
        """The ranks a block is written by (for node-level writers: the node's first rank)."""
        firsts = [n.ranks[0] for n in self.nodes]
        if who == "all":
            return list(self.ranks)
        if who == "rank0":
            return [self.ranks[0]]
        if who == "logger":
            return [self.logger]
        if who in ("node0", "agents", "scheduler"):
            return firsts
        if who == "first_agent":
            return firsts[:1]
        assert faulty is not None, who
        fnode = self.nodes[faulty.node]
        if who in ("faulty", "kernel"):
            return [faulty]
        if who == "faulty_node":
            return list(fnode.ranks)
        if who == "others":
            return [r for r in self.ranks if r is not faulty]
        if who == "agent":
            return [fnode.ranks[0]]
        if who == "agents_others":
            return [f for f in firsts if f.node != faulty.node]
        if who in ("peers", "stage_ranks"):
            return list(chosen or [])
        raise ValueError(f"unknown writer {who!r}")

    @property
    def logger(self) -> Rank:
        return self.ranks[-1] if self.fam["logger"] == "last" else self.ranks[0]

    # ---- writing records -------------------------------------------------------------------------
    def add(self, r: Rank, stream: str, t: float, text: str, *, nl: bool = True, role: str | None = None,
            key: str | None = None) -> Record:
        rec = Record(t=t, order=self._order, text=text, nl=nl, role=role, key=key)
        self._order += 1
        self.files.setdefault(self.file_of(r, stream), []).append(rec)
        return rec

    def emit(self, who_ranks: list[Rank], stream: str, lines: list[str], t: float, *, gap: float = 0.002,
             role: str | None = None, key: str | None = None, extra: dict | None = None,
             wrap: bool = True) -> float:
        """Render `lines` for each rank at `t` onwards (one `gap` apart); returns the time after them."""
        end = t
        for r in who_ranks:
            tt = t + self.rng.uniform(0, 0.05)
            for line in lines:
                ctx = self.rank_ctx(r, tt, extra)
                text = self.wrap(r, stream, render(line, ctx), wrap)
                self.add(r, stream, tt, text, role=role, key=key)
                tt += gap * self.rng.uniform(0.5, 1.5)
            end = max(end, tt)
        return end

    def wrap(self, r: Rank, stream: str, text: str, wrap: bool = True) -> str:
        """`text` with the family's per-stream prefix (torchrun's `[rank3]:`, `[default3]:`), if any."""
        if not wrap or stream not in ("stdout", "stderr"):
            return text
        template = self.fam["wrap"][stream]
        prefixed = template.replace("{rank}", str(r.rank)).replace("{local}", str(r.local))
        return prefixed.replace("{line}", text)

    def kernel(self, r: Rank, t: float, lines: list[str], *, role: str | None = None,
               key: str | None = None) -> float:
        """Kernel messages on `r`'s node, with the family's kernel prefix (syslog/dmesg/ctime stamps)."""
        prefix = self.fam["kernel"]["prefix"]
        for line in lines:
            ctx = self.rank_ctx(r, t)
            self.add(r, "kernel", t, render(prefix + line, ctx), role=role, key=key)
            t += self.rng.uniform(0.00001, 0.002)
        return t

    # ---- output ------------------------------------------------------------------------------------
    def labelled(self) -> dict[str, list[Record]]:
        out: dict[str, list[Record]] = {role: [] for role in ROLES}
        for recs in self.files.values():
            for rec in recs:
                if rec.role:
                    out[rec.role].append(rec)
        return out

    def write(self, folder: Path, *, gz: bool, manifest: dict, truncate: set[tuple[str, str]]) -> None:
        """Write every file (records in time order; a labelled record never glued to a tqdm update) and
        `job.json`. Files in `truncate` lose the second half of their last (unlabelled) line."""
        folder.mkdir(parents=True, exist_ok=True)
        for (node, name), recs in sorted(self.files.items()):
            recs.sort(key=lambda x: (x.t, x.order))
            parts: list[str] = []
            pending = False
            for rec in recs:
                if pending and rec.role:
                    parts.append("\n")
                parts.append(rec.text + ("\n" if rec.nl else ""))
                pending = not rec.nl
            if (node, name) in truncate and recs and not recs[-1].role and len(recs[-1].text) > 20:
                last = parts[-1]
                parts[-1] = last[: max(8, len(last) // 2)].rstrip("\n")
            data = "".join(parts).encode("utf-8")
            path = folder / node / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if gz:
                with open(path.with_name(name + ".gz"), "wb") as fh, \
                        gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as out:
                    out.write(data)
            else:
                path.write_bytes(data)
        (folder / "job.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
