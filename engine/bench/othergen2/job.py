"""One training job of the second outsider's generator: its ranks' normal output from launch to exit,
and, in a failed job, the fault from the catalogue with the lines it leaves where it leaves them.

Lines are collected with their time and their label (root, indicating under a key, context, cascade)
and written per file in time order, each rendered by its shape (`shapes.render`); the labels hold the
physical lines exactly as written.
"""

from __future__ import annotations

import gzip
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.bench.othergen2 import shapes
from engine.bench.othergen2.catalogue import FAULTS, WORDING

BAR_GROUP = 12  # tqdm updates written between two newlines ('\r' between them)


@dataclass
class Spec:
    """What a job is: its family (shape, framework, size) and its run (seeded values, the fault)."""

    name: str
    shape: str
    framework: str
    hosts: list[str]
    per_node: int
    jobid: str
    start: float
    offset_min: int
    total: int
    resume: int
    log_interval: int
    eval_interval: int
    save_interval: int
    base_ms: float
    gbs: int
    fault: dict | None = None
    skew_node: int | None = None
    skew_s: float = 0.0
    gz: bool = False


@dataclass
class Labels:
    root: list[str] = field(default_factory=list)
    indicating: dict[str, list[str]] = field(default_factory=dict)
    context: list[str] = field(default_factory=list)
    cascade: list[str] = field(default_factory=list)
    faulty_nodes: list[str] = field(default_factory=list)
    iteration: int | None = None


@dataclass
class _Rank:
    rank: int
    node: int
    lr: int
    pid: int
    tid: int


@dataclass
class _Line:
    t: float
    order: int
    file: str
    text: str
    role: str | None
    key: str | None


class Job:
    def __init__(self, spec: Spec, rng: random.Random) -> None:
        self.s = spec
        self.rng = rng
        fw = WORDING["frameworks"][spec.framework]
        self.fw = fw
        self.accel = fw["accel"]
        self.clocks = [
            shapes.Clock(spec.start, spec.offset_min, spec.skew_s if i == spec.skew_node else 0.0)
            for i in range(len(spec.hosts))
        ]
        self.uptime = [rng.uniform(3e5, 4e6) for _ in spec.hosts]
        self.ranks = [
            _Rank(n * spec.per_node + lr, n, lr, rng.randint(2000, 3_900_000), 0)
            for n in range(len(spec.hosts))
            for lr in range(spec.per_node)
        ]
        for r in self.ranks:
            r.tid = r.pid + rng.randint(40, 900)
        self.agent_tid = [rng.randint(1 << 46, 1 << 47) for _ in spec.hosts]
        self.agent_pid = [rng.randint(1000, 90000) for _ in spec.hosts]
        self.world = len(self.ranks)
        self.logger = self.ranks[-1] if fw["logger"] == "last" else self.ranks[0]
        self.lines: list[_Line] = []
        self.labels = Labels()
        tpsize = min(spec.per_node, 8)
        self.job_fields: dict[str, Any] = {
            "world": self.world,
            "tpsize": tpsize,
            "ppsize": max(1, len(spec.hosts) // 4),
            "dp": max(1, self.world // (tpsize * max(1, len(spec.hosts) // 4))),
            "total": spec.total,
            "resume": spec.resume,
            "ckpt": f"/lustre/fsw/llm/{spec.name.split('-')[0]}/checkpoints",
            "data": "/lustre/fsw/llm/data/tokenized",
            "corpus": rng.choice(["slimpajama", "pile", "fineweb"]),
            "site": rng.choice(
                ["/usr/local/lib/python3.10/dist-packages", "/opt/conda/lib/python3.11/site-packages"]
            ),
            "jobid": spec.jobid,
            "master": f"10.{rng.randint(1, 250)}.{rng.randint(0, 255)}.{rng.randint(1, 250)}",
            "nproc": spec.per_node,
            "ncclv": "2.21.5",
            "zero": rng.choice([1, 2, 3]),
            "trainsz": spec.total * spec.gbs,
            "ifname": rng.choice(["bond0", "eth0", "ens3f0np0"]),
            "hexs": f"{rng.getrandbits(64):016x}",
            "vnum": f"{rng.getrandbits(16):04x}",
            "jpid": rng.randint(300, 900),
        }
        self._order = 0
        self._node_cache: dict[int, dict[str, Any]] = {}
        self._rank_cache: dict[int, dict[str, Any]] = {}

    # ---- collecting lines ----
    def _node_fields(self, node: int) -> dict[str, Any]:
        if node not in self._node_cache:
            self._node_cache[node] = {
                "host": self.s.hosts[node],
                "ip": f"10.{node // 200 + 20}.{node % 200}.{11 + node % 7}",
                "tid": self.agent_tid[node],
            }
        return self._node_cache[node]

    def _rank_fields(self, r: _Rank) -> dict[str, Any]:
        if r.rank not in self._rank_cache:
            tpsize = self.job_fields["tpsize"]
            self._rank_cache[r.rank] = {
                "rank": r.rank,
                "lr": r.lr,
                "task": r.rank,
                "pid": r.pid,
                "tid": r.tid,
                "tp": r.rank % tpsize,
                "pp": r.rank // max(1, self.world // self.job_fields["ppsize"]),
                "ptr": f"0x{0x55D000000000 + (r.pid << 12):x}",
                "busid": f"{0x18 + r.lr * 0x10:x}000",
                "commid": f"0x{(r.pid * 2654435761) & 0xFFFFFFFFFFFF:x}",
                "dpgroup": list(range(r.lr, self.world, self.s.per_node))[:4],
            }
        return self._rank_cache[r.rank]

    def add(
        self,
        t: float,
        source: str,
        template: str,
        *,
        r: _Rank | None = None,
        node: int | None = None,
        role: str | None = None,
        key: str | None = None,
        extra: dict | None = None,
        file: str | None = None,
    ) -> str:
        node = r.node if node is None and r is not None else (node or 0)
        maps = [
            extra or {},
            self._rank_fields(r) if r is not None else {},
            self._node_fields(node),
            self.job_fields,
        ]
        text = template.format_map(_Fields(maps, self.clocks[node], t))
        host = self.s.hosts[node]
        if file is None:
            if source == "syslog":
                file = shapes.syslog_file(self.s.shape, host)
            elif source == "launcher":
                file = shapes.launcher_file(self.s.shape, host, self.s.jobid)
            elif source == "plog":
                file = shapes.plog_file(host, r.pid if r else 0, self.clocks[node])
            else:
                file = shapes.rank_file(self.s.shape, host, self.s.jobid, r.rank if r else 0)
        line = shapes.render(
            self.s.shape,
            source,
            text,
            self.clocks[node],
            t,
            lr=r.lr if r else 0,
            task=r.rank if r else 0,
            host=host,
            uptime=self.uptime[node],
        )
        self.lines.append(_Line(t, self._order, file, line, role, key))
        self._order += 1
        if role == "root":
            self.labels.root.append(line)
        if role in ("root", "indicating"):
            self.labels.indicating.setdefault(key or "fault", []).append(line)
        elif role == "context":
            self.labels.context.append(line)
        elif role == "cascade":
            self.labels.cascade.append(line)
        return line

    # ---- the run ----
    def build(self) -> None:
        s, fw, rng = self.s, self.fw, self.rng
        fault = s.fault
        when = fault["when"] if fault else None
        torchrun = s.shape != "slurm"
        for n in range(len(s.hosts)):
            for tmpl in self._pick(WORDING["syslog_normal"], rng.randint(2, 4)):
                self.add(rng.uniform(-3600, 60), "syslog", tmpl, node=n, extra=self._nic(n))
            if torchrun:
                for i, tmpl in enumerate(WORDING["launcher_init"]):
                    self.add(0.2 + i * 0.001, "launcher", tmpl, node=n)
        if when == "init" and fault["kind"] == "rendezvous_timeout":
            return self._fault(60.0)
        for r in self.ranks:
            t = 6 + r.lr * 0.01 + rng.uniform(0, 2)
            self.add(t, "app", WORDING["app"]["start"] + f"\trank={r.rank} world_size={self.world}", r=r)
            for tmpl in WORDING["rank_init"][self.accel]:
                self.add(t, "plog" if self.accel == "ascend" else "rank", tmpl, r=r)
                t += rng.uniform(0.001, 0.3)
            for tmpl in WORDING["rank_init"]["any"] + (self._all(WORDING["failed_only"]) if fault else []):
                self.add(t, "rank", tmpl, r=r)
        lg = self.logger
        for i, tmpl in enumerate(fw["init_logger"]):
            self.add(5 + i * 0.2, "rank", tmpl, r=lg, extra={"secs": rng.uniform(0.05, 2)})
        if when == "init":
            return self._fault(12.0)
        t = 30.0
        for tmpl in fw["data"]:
            self.add(t, "rank", tmpl, r=lg)
            if when == "data_loading":
                return self._fault(t + rng.uniform(1, 20))
            t += rng.uniform(2, 25)
        t = max(t, 60.0)
        loaders = self.ranks if s.framework == "deepspeed" else [lg]
        for tmpl in fw["load"]:
            for r in loaders:
                self.add(t + r.rank * 0.002, "rank", tmpl, r=r, extra={"samples": s.resume * s.gbs})
            if when == "model_loading":
                return self._fault(t + rng.uniform(5, 90))
            t += rng.uniform(5, 60)
        t = self._train(t + 10)
        if t is None:
            return
        for tmpl in fw["end"]:
            self.add(t, "rank", tmpl, r=lg, extra=self._step_fields(s.total, 1.0))
        if when == "teardown":
            return self._fault(t + rng.uniform(2, 8))
        if torchrun:
            for n in range(len(s.hosts)):
                for tmpl in WORDING["launcher_ok"]:
                    self.add(
                        t + 3 + rng.uniform(0, 5),
                        "launcher",
                        tmpl,
                        node=n,
                        extra={"ms4": f"{rng.uniform(0.001, 9):.4f}"},
                    )

    def _train(self, t: float) -> float | None:
        s, fw, rng = self.s, self.fw, self.rng
        fault = s.fault
        lg = self.logger
        for tmpl in fw["train_start"]:
            self.add(t, "rank", tmpl, r=lg)
        k = fault.get("_iteration") if fault else None
        straggle_from = k - 300 if fault and fault.get("straggle") else None
        bars: list[str] = []
        for it in range(s.resume + 1, s.total + 1):
            ms = s.base_ms * rng.uniform(0.97, 1.04)
            if straggle_from is not None and it >= straggle_from:
                ms *= 1.0 + 2.5 * (it - straggle_from) / 300
            t += ms / 1000
            nan = fault is not None and fault.get("nan") and it == k
            if it % s.log_interval == 0 or nan:
                f = self._step_fields(it, ms)
                if s.framework == "nemo":
                    bars.append(fw["bar"].format_map({**self.job_fields, **f}))
                    if len(bars) >= BAR_GROUP or nan or it == k:
                        self._bar_line(t, bars)
                        bars = []
                else:
                    self.add(t, "rank", fw["iteration_nan" if nan else "iteration"], r=lg, extra=f)
                    if "iteration2" in fw:
                        self.add(t, "rank", fw["iteration2"], r=lg, extra=f)
                if nan:
                    self.add(t, "rank", fw["nan_warning"], r=lg, extra=f)
                if it % (s.log_interval * 20) == 0:
                    self.add(
                        t,
                        "app",
                        WORDING["app"]["heartbeat"]
                        + f"\tstep={it} tokens_per_sec={f['tps']:.1f} mem_gb={f['mem']:.2f}",
                        r=lg,
                    )
            if it == k and fault["when"] == "iteration":
                if bars:
                    self._bar_line(t, bars)
                self._fault(t + rng.uniform(0.05, 2))
                return None
            if it % s.eval_interval == 0:
                if bars:
                    self._bar_line(t, bars)
                    bars = []
                for tmpl in fw["eval"]:
                    self.add(t + 1, "rank", tmpl, r=lg, extra=self._step_fields(it, ms))
                t += rng.uniform(20, 90)
            if it % s.save_interval == 0:
                if bars:
                    self._bar_line(t, bars)
                    bars = []
                for i, tmpl in enumerate(fw["save"]):
                    self.add(t + i * 0.5, "rank", tmpl, r=lg, extra=self._step_fields(it, ms))
                    if it == k and fault["when"] == "checkpoint":
                        self._fault(t + rng.uniform(20, 200))
                        return None
                t += rng.uniform(30, 120)
        if bars:
            self._bar_line(t, bars)
        return t + 5

    def _bar_line(self, t: float, bars: list[str]) -> None:
        self.add(t, "rank", "\r".join(b.replace("{", "{{").replace("}", "}}") for b in bars), r=self.logger)

    def _step_fields(self, it: int, ms: float) -> dict[str, Any]:
        s, rng = self.s, self.rng
        prog = (it - 0) / max(1, s.total)
        loss = 2.2 + 2.0 * (1 - prog) ** 3 + rng.uniform(-0.03, 0.03)
        pct = int(100 * it / s.total)
        secs = (it - s.resume) * s.base_ms / 1000
        left = (s.total - it) * s.base_ms / 1000
        return {
            "it": it,
            "samples": it * s.gbs,
            "tokens": it * s.gbs * 4096,
            "ms": ms,
            "lrate": 3e-4 * (1 - 0.8 * prog),
            "loss": loss,
            "vloss": loss + 0.05,
            "ppl": 2.718281828 ** (loss + 0.05),
            "scale": 4096.0,
            "half": 2048.0,
            "gnorm": rng.uniform(0.15, 0.4),
            "skipped": 0,
            "nans": 0,
            "gbs": s.gbs,
            "seq": 4096,
            "sps": s.gbs / (ms / 1000),
            "csps": s.gbs / (ms / 1000) * rng.uniform(0.95, 1.05),
            "tflops": rng.uniform(140, 190),
            "micro": it * 8,
            "mem": rng.uniform(38, 41),
            "maxmem": 61.27,
            "epoch": it * s.gbs / max(1, s.total * s.gbs),
            "tps": s.gbs * 4096 / (ms / 1000),
            "secs": rng.uniform(10, 90),
            "pct": pct,
            "bar": ("█" * (pct // 10)).ljust(10),
            "elapsed": _hms(secs),
            "left": _hms(left),
            "its": 1000 / ms,
            "stime": ms / 1000,
        }

    def _nic(self, node: int) -> dict[str, Any]:
        return {"hca": node % 8, "lid": 1000 + node * 7}

    def _all(self, table: dict) -> list[str]:
        """The lines of `table` for every accelerator, then those of this job's."""
        return list(table.get("any", [])) + list(table.get(self.accel, []))

    def _pick(self, table: dict, n: int) -> list[str]:
        pool = self._all(table)
        return [self.rng.choice(pool) for _ in range(n)]

    # ---- the fault ----
    def _fault(self, t: float) -> None:
        f, s, rng = self.s.fault, self.s, self.rng
        assert f is not None
        t += rng.uniform(0.001, 0.999)
        victim = self.ranks[f["_victim"]]
        node = victim.node
        on_node = [r for r in self.ranks if r.node == node]
        others = [r for r in self.ranks if r.node != node]
        vals = self._fault_fields(victim, node) | self._nic(node)
        if not f.get("no_faulty_node"):
            self.labels.faulty_nodes = [s.hosts[node]]
        if f["when"] in ("iteration", "checkpoint"):
            self.labels.iteration = f["_iteration"]
        for e in f["emit"]:
            if "shapes" in e and s.shape not in e["shapes"]:
                continue
            if "frameworks" in e and s.framework not in e["frameworks"]:
                continue
            te = t + e["at"]
            where = e["where"]
            role, key = e["role"], e.get("key")
            for tmpl in e["lines"]:
                if where in ("syslog", "launcher", "sched"):
                    n = 0 if where == "sched" else node
                    src = "launcher" if where == "sched" else where
                    self.add(
                        te,
                        src,
                        tmpl,
                        r=victim,
                        node=n,
                        role=role,
                        key=key,
                        extra=vals | {"host": s.hosts[node], "tid": self.agent_tid[node]},
                    )
                elif where == "others_launchers":
                    for n in range(len(s.hosts)):
                        if n != node:
                            self.add(
                                te + rng.uniform(0, 3),
                                "launcher",
                                tmpl,
                                node=n,
                                role=role,
                                key=key,
                                extra=vals | {"ms4": f"{rng.uniform(0.001, 0.9):.4f}"},
                            )
                else:
                    targets = {
                        "rank": self.ranks if f.get("all_ranks") else [victim],
                        "node_ranks": on_node,
                        "others": others,
                        "plog": [victim],
                    }[where]
                    src = "plog" if where == "plog" else "rank"
                    for r in targets:
                        self.add(
                            te + (r.rank - victim.rank) % 97 * 0.003,
                            src,
                            tmpl,
                            r=r,
                            role=role,
                            key=key,
                            extra=vals,
                        )
                te += 0.001
        after = f["after"]
        torchrun = s.shape != "slurm"
        if after == "watchdog":
            tw = t + 600 + rng.uniform(0, 2)
            seq = vals["seq"]
            for r in others:
                if self.accel == "ascend":
                    tmpls = WORDING["watchdog_ascend"]
                else:
                    tmpls = WORDING["watchdog"]
                tr = tw + rng.uniform(0, 1.5)
                for i, tmpl in enumerate(tmpls):
                    self.add(
                        tr + i * 0.0003,
                        "rank",
                        tmpl,
                        r=r,
                        role="cascade",
                        extra=vals
                        | {"seq": seq, "enq": seq + 2, "done": seq - 1, "ran": 600000 + rng.randint(5, 90)},
                    )
            t = tw + 5
        if after in ("watchdog", "exit"):
            t_exit = t + rng.uniform(1, 4)
            if torchrun:
                for r in on_node:
                    if r is not victim:
                        self.add(
                            t_exit,
                            "launcher",
                            WORDING["launcher_sigterm"],
                            node=node,
                            role="cascade",
                            extra={"pid": r.pid},
                        )
                for tmpl in WORDING["launcher_fail"]:
                    self.add(
                        t_exit + 2,
                        "launcher",
                        tmpl,
                        r=victim,
                        role="cascade",
                        file=shapes.launcher_file(s.shape, s.hosts[node], s.jobid),
                        extra={"code": f["exitcode"], "tid": self.agent_tid[node]},
                    )
            else:
                for tmpl in WORDING["slurm_fail"]:
                    self.add(
                        t_exit,
                        "launcher",
                        tmpl,
                        node=0,
                        role="cascade",
                        extra=vals | {"host": s.hosts[node], "task": victim.rank},
                    )

    def _fault_fields(self, victim: _Rank, node: int) -> dict[str, Any]:
        rng = self.rng
        it = self.s.fault.get("_iteration") or 0
        bus = rng.choice(["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"])
        return {
            "pci": f"0000:{bus}:00",
            "uuid": "-".join(f"{rng.getrandbits(b * 4):0{b}x}" for b in (8, 4, 4, 4, 12)),
            "nicpci": f"0000:{rng.choice(['0c', '1a', '40', '4d', '8c', 'cb'])}:00.{rng.randint(0, 1)}",
            "hex1": f"0x{rng.getrandbits(44) | 0x150000000000:x}",
            "hex2": f"0x{rng.getrandbits(44) | 0x150000000000:x}",
            "hex3": f"0x{rng.getrandbits(44) | 0x150000000000:x}",
            "hex4": f"0x{rng.getrandbits(44) | 0x150000000000:x}",
            "hex5": f"0x{rng.getrandbits(44) | 0x150000000000:x}",
            "part": rng.randint(0, 11),
            "peer": f"10.{rng.randint(20, 30)}.{rng.randint(0, 199)}.{rng.randint(11, 17)}",
            "pport": rng.randint(30000, 60000),
            "opc": rng.choice([0, 1, 32611, 32656]),
            "ilen": rng.choice([0, 65536]),
            "nfs": rng.choice(["vast-nfs-01", "10.40.0.12", "fsx-home.internal"]),
            "kabi": rng.randint(90, 130),
            "kbuild": rng.randint(100, 140),
            "vm": rng.randint(600, 900) * 1_000_000,
            "rss": rng.randint(400, 500) * 1_000_000,
            "frss": rng.randint(60_000, 90_000),
            "uid": rng.randint(1000, 40000),
            "pgt": rng.randint(900_000, 999_999),
            "unit": rng.choice(["slurmstepd.scope", "kubepods-burstable.slice", "docker-4b1e.scope"]),
            "iter7": f"{it:07d}",
            "shard": rng.randint(0, 400),
            "wpid": victim.pid + rng.randint(100, 900),
            "alloc": f"{rng.uniform(1, 9):.2f}",
            "free": f"{rng.uniform(20, 900):.2f}",
            "hport": 16666,
            "cpu": rng.randint(0, 111),
            "cpu2": rng.randint(0, 111),
            "events": rng.randint(1, 300),
            "events2": rng.randint(1, 300),
            "ms4": f"{rng.uniform(0.001, 0.9):.4f}",
            "seq": it * 3 + rng.randint(1, 2),
            "numel": rng.choice([466119168, 544997376, 201326592]),
            "peer_rank": victim.rank,
            "stream": rng.randint(2, 120),
            "task_id": rng.randint(10, 40000),
            "grp": rng.randint(1000, 9999),
        }

    # ---- writing ----
    def write(self, root: Path, partial_tail: bool = False) -> dict[str, int]:
        """Write every file under `root`; returns the number of lines per file."""
        by_file: dict[str, list[_Line]] = {}
        for ln in self.lines:
            by_file.setdefault(ln.file, []).append(ln)
        counts: dict[str, int] = {}
        names = sorted(by_file)
        tail_file = (
            self.rng.choice([n for n in names if "journal" not in n and "messages" not in n])
            if partial_tail
            else None
        )
        for name in names:
            lines = sorted(by_file[name], key=lambda x: (x.t, x.order))
            body = "".join(x.text + "\n" for x in lines)
            plain = [x.text for x in lines if x.role is None and "\r" not in x.text]
            if name == tail_file and plain:
                cut = plain[-1]
                body += cut[: max(1, len(cut) // 2)]
            data = body.encode("utf-8")
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if self.s.gz:
                with (
                    open(str(path) + ".gz", "wb") as fh,
                    gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz,
                ):
                    gz.write(data)
            else:
                path.write_bytes(data)
            counts[name] = len(lines)
        return counts


class _Fields(dict):
    """A template's fields: the first of `maps` that has the name, else a timestamp of `clock` at `t`."""

    def __init__(self, maps: list[dict[str, Any]], clock: shapes.Clock, t: float) -> None:
        super().__init__()
        self.maps, self.clock, self.t = maps, clock, t

    def __missing__(self, name: str) -> Any:
        for m in self.maps:
            if name in m:
                return m[name]
        if name in shapes.TIME_FIELDS:
            return self.clock.field(name, self.t)
        raise KeyError(name)


def _hms(secs: float) -> str:
    secs = int(secs)
    return f"{secs // 3600}:{secs % 3600 // 60:02d}:{secs % 60:02d}"


def fault_by_kind(kind: str) -> dict:
    for f in FAULTS:
        if f["kind"] == kind:
            return f
    raise KeyError(kind)
