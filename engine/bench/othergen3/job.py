"""One job's logical log streams: what every rank, node kernel, node agent and the launcher print over
the run, with the fault's lines labelled. `engine.bench.othergen3.shapes` turns the streams into files."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from string import Template

from engine.bench.othergen3 import clock
from engine.bench.othergen3.catalogue import Group, Kind, wording

SHAPES = ("ray", "mpi", "sagemaker", "azureml", "msrun")
FRAMEWORK = {"ray": "deepspeed", "mpi": "horovod", "sagemaker": "hf", "azureml": "hf", "msrun": "mindformers"}
INIT_END, DATA_END, MODEL_END = 40.0, 90.0, 150.0
SAVE_SECS = 45.0


@dataclass
class Line:
    t: float  # true seconds since the job's start (the launcher console orders by it)
    text: str
    label: str | None = None  # root | indicating | context | cascade
    key: str | None = None
    err: bool = False  # written to stderr (mpirun's <stderr> tag)


@dataclass
class Rank:
    rank: int
    node: int
    local: int
    pid: int


@dataclass
class Spec:
    """The settings of one job; the history jobs of a case share `settings()`."""

    shape: str
    hosts: list[str]
    ips: list[str]
    per_node: int
    start: float
    resume: int
    steps: int
    log_every: int
    step_secs: float
    seed: int
    model: str
    skew: dict[int, float] = field(default_factory=dict)  # node -> clock offset in seconds

    @property
    def world(self) -> int:
        return len(self.hosts) * self.per_node

    @property
    def framework(self) -> str:
        return FRAMEWORK[self.shape]

    def settings(self) -> dict:
        return {
            "model": self.model,
            "framework": self.framework,
            "launcher": self.shape,
            "nodes": len(self.hosts),
            "ranks_per_node": self.per_node,
        }


@dataclass
class Fault:
    kind: Kind
    node: int
    local: int
    t: float  # seconds since start
    step: int | None


@dataclass
class Streams:
    ranks: list[Rank]
    rank_lines: dict[int, list[Line]]
    kernel: dict[int, list[Line]]
    agent: dict[int, list[Line]]
    launcher: list[Line]
    end: float


def _fill(template: str, values: dict) -> str:
    return Template(template).safe_substitute(values)


class Builder:
    """Builds the streams of one job from its spec (and, for a failed job, its fault)."""

    def __init__(self, spec: Spec, rng: random.Random) -> None:
        self.spec, self.fault, self.rng = spec, None, rng
        self.w = wording()
        n = len(spec.hosts)
        self.ranks = [
            Rank(r, r // spec.per_node, r % spec.per_node, rng.randint(20000, 65000))
            for r in range(spec.world)
        ]
        self.rank_lines: dict[int, list[Line]] = {r.rank: [] for r in self.ranks}
        self.kernel: dict[int, list[Line]] = {i: [] for i in range(n)}
        self.agent: dict[int, list[Line]] = {i: [] for i in range(n)}
        self.launcher: list[Line] = []
        self.boot = {i: spec.start - rng.uniform(3600, 86400 * 20) for i in range(n)}
        self.node_ids = [f"{rng.getrandbits(224):056x}" for _ in range(n)]
        self.common = {
            "world": spec.world,
            "nnodes": n,
            "nproc": spec.per_node,
            "head_ip": spec.ips[0],
            "host0": spec.hosts[0],
            "jobid": rng.randint(10000, 65000),
            "ctl_pid": rng.randint(2000, 9000),
            "cluster_id": f"{rng.getrandbits(224):056x}",
            "run_uuid": _uuid(rng),
            "logdir": "/job/output/msrun_log",
            "epoch": rng.randint(10**9, 2 * 10**9),
        }
        self.stop = float("inf")
        self.train_start = MODEL_END
        self.save_every = 500
        self.step_times = self._step_times()
        self.end = self.step_times[-1][1] + 30 if self.step_times else MODEL_END

    def strike(self, fault: Fault) -> None:
        """Make this the failed job: nothing normal is printed from the fault's moment on."""
        self.fault, self.stop = fault, fault.t

    # --- time ---
    def _step_times(self) -> list[tuple[int, float]]:
        out, t = [], self.train_start
        for s in range(self.spec.resume + 1, self.spec.resume + self.spec.steps + 1):
            t += self.spec.step_secs * (1 + 0.03 * self.rng.random())
            out.append((s, t))
            if s % self.save_every == 0:
                t += SAVE_SECS
        return out

    def time_of_step(self, step: int) -> float:
        return dict(self.step_times)[step]

    def values(self, node: int, t: float, rank: Rank | None = None, template: str = "") -> dict:
        clock_t = self.spec.start + t + self.spec.skew.get(node, 0.0)
        v = dict(self.common)
        v.update(clock.stamps(clock_t, self.boot[node], template))
        v.update(
            host=self.spec.hosts[node],
            ip=self.spec.ips[node],
            node_id=self.node_ids[node],
            pid=rank.pid if rank else 1000 + node,
            tid=281470000000000 + (rank.pid if rank else node) * 7919,
            kpid=self.rng.randint(300, 99999),
            iface="ens5" if self.spec.shape == "sagemaker" else "eth0",
        )
        if rank:
            v.update(rank=rank.rank, local=rank.local, bus=f"{0x10 + 0x20 * rank.local:02x}")
        if self.fault:
            f = self.fault
            fr = self.ranks[f.node * self.spec.per_node + f.local]
            v.update(
                fhost=self.spec.hosts[f.node],
                fip=self.spec.ips[f.node],
                fpid=fr.pid,
                frank=fr.rank,
                flocal=f.local,
                fnode=f.node,
                fnode_id=self.node_ids[f.node],
                fbus=f"{0x10 + 0x20 * f.local:02x}",
            )
        return v

    def emit(
        self,
        where: list[Line],
        node: int,
        t: float,
        template: str,
        rank: Rank | None = None,
        label: str | None = None,
        key: str | None = None,
        err: bool = False,
        extra: dict | None = None,
        force: bool = False,
    ) -> None:
        if t >= self.stop and not force:
            return
        v = self.values(node, t, rank, template)
        if extra:
            v.update(extra)
        where.append(Line(t, _fill(template, v), label, key, err))

    # --- normal run ---
    def build(self) -> Streams:
        self._launcher_init()
        self._agents()
        for r in self.ranks:
            self._rank_init(r)
            self._data_and_model(r)
        self._training()
        self._kernel_noise()
        if self.fault:
            self._fault()
            if self.fault.kind.stop == "faulty_node_never":  # its daemons never started: no rank output
                for r in self.ranks:
                    if r.node == self.fault.node:
                        self.rank_lines[r.rank] = []
        elif self.spec.shape in ("ray", "azureml"):
            self.emit(
                self.launcher,
                0,
                self.end - 2,
                "${ts} INFO -- Training completed successfully, world size ${world}",
            )
        for lines in (*self.rank_lines.values(), *self.kernel.values(), *self.agent.values(), self.launcher):
            lines.sort(key=lambda ln: ln.t)
        end = self.fault.t + 1900 if self.fault else self.end
        return Streams(self.ranks, self.rank_lines, self.kernel, self.agent, self.launcher, end)

    def _launcher_init(self) -> None:
        shape = self.w["shapes"][self.spec.shape]
        lines = {
            "ray": "driver_init",
            "mpi": "console_init",
            "sagemaker": "toolkit_init",
            "azureml": "launcher_init",
            "msrun": "scheduler_init",
        }[self.spec.shape]
        for i, tpl in enumerate(shape[lines]):
            if "${rank}" in tpl:  # msrun names every worker it starts
                for r in self.ranks:
                    self.emit(self.launcher, 0, 1.0 + i + r.rank * 0.01, tpl, rank=r)
            else:
                self.emit(self.launcher, 0, 1.0 + i + self.rng.random() * 0.3, tpl)

    def _agents(self) -> None:
        shape = self.w["shapes"][self.spec.shape]
        rng = self.rng
        for node in range(len(self.spec.hosts)):
            if self.spec.shape == "ray":
                for i, tpl in enumerate(shape["raylet_init"]):
                    self.emit(self.agent[node], node, 2.0 + i, tpl, extra={"wpid": rng.randint(20000, 65000)})
                t = 60.0
                while t < self.end:
                    tpl = rng.choice(shape["raylet_tick"])
                    self.emit(
                        self.agent[node],
                        node,
                        t,
                        tpl,
                        extra={
                            "mib": rng.randint(100, 9000),
                            "objs": rng.randint(3, 400),
                            "mbps": rng.randint(200, 1900),
                        },
                    )
                    t += rng.uniform(300, 900)
            elif self.spec.shape == "msrun":
                for r in self.ranks:
                    if r.node == node:
                        for i, tpl in enumerate(shape["plog_init"]):
                            self.emit(
                                self.agent[node],
                                node,
                                9.0 + i + r.local * 0.05,
                                tpl,
                                rank=r,
                                extra={"cc": rng.randint(100, 2000)},
                            )
        if self.spec.shape == "ray":  # gcs_server on the head node rides in launcher-side file via agent[0]
            for i, tpl in enumerate(shape["gcs_init"]):
                for node in range(len(self.spec.hosts)):
                    self.emit(self.agent[0], node, 1.5 + i + node * 0.01, tpl)

    def _rank_init(self, r: Rank) -> None:
        rng, ph = self.rng, self.w["phases"]
        t = 8.0 + rng.uniform(0, 6)
        out = self.rank_lines[r.rank]
        if self.spec.shape == "mpi":
            for tpl in self.w["shapes"]["mpi"]["rank_init"]:
                t += rng.uniform(0.05, 0.4)
                self.emit(
                    out,
                    r.node,
                    t,
                    tpl,
                    rank=r,
                    extra={"nic": r.local % 4, "nic2": r.local % 4 + 4, "ptr": f"{rng.getrandbits(40):010x}"},
                )
        if r.rank == 0:
            t += 0.5
            self.emit(out, r.node, t, ph["init"][0], rank=r, extra={"config": _config_dump(self.spec, rng)})
        ms = self.spec.framework == "mindformers"
        warn = self.w["shapes"]["msrun"]["rank_warn"][0] if ms else ph["init_repeated_warning"][0]
        t += rng.uniform(0.1, 1)
        if not ms:
            self.emit(out, r.node, t, ph["init"][1], rank=r, err=True)
            if rng.random() < 0.15:
                self.emit(out, r.node, t + 0.2, ph["init"][2], rank=r, err=True)
        for _ in range(2):
            t += rng.uniform(1, 4)
            self.emit(out, r.node, t, warn, rank=r, err=True)
        if self.fault:  # a harmless warning that only the failed job prints
            only = self.w["shapes"]["msrun"]["failed_only_warning"][0] if ms else ph["failed_only_warning"][0]
            self.emit(out, r.node, t + 0.3, only, rank=r, err=True)

    def _data_and_model(self, r: Rank) -> None:
        rng, ph, out = self.rng, self.w["phases"], self.rank_lines[r.rank]
        t = INIT_END + rng.uniform(0, 5)
        shards = rng.randint(2, 6) if r.local == 0 else 1
        for _ in range(shards):
            t += rng.uniform(1, 8)
            odd = rng.random() < 0.02  # a path with a latin-1 byte (not UTF-8)
            folder = "caf" + chr(0xDCE9) if odd else "pile"
            path = f"/fsx/datasets/{folder}/shard-{rng.randint(0, 99999):05d}.jsonl"
            self.emit(out, r.node, t, ph["data_loading"][0], rank=r, extra={"sample_path": path})
        self.emit(
            out,
            r.node,
            t + 1,
            ph["data_loading"][1],
            rank=r,
            extra={"ndocs": rng.randint(10**6, 10**8), "data_prefix": "/fsx/datasets/pile/pile_00"},
        )
        self.emit(out, r.node, t + 2, ph["data_loading"][2], rank=r, extra={"uuid": _uuid(rng)})
        if self.spec.resume and (r.local == 0 or rng.random() < 0.3):
            t = DATA_END + rng.uniform(0, 20)
            v = {
                "ckpt_root": self._ckpt_root(),
                "resume": self.spec.resume,
                "ptr": f"{rng.getrandbits(44):011x}",
            }
            self.emit(out, r.node, t, ph["model_loading"][0], rank=r, extra=v)
            self.emit(out, r.node, t + rng.uniform(10, 40), ph["model_loading"][1], rank=r, extra=v)

    def _ckpt_root(self) -> str:
        return {
            "sagemaker": "/opt/ml/checkpoints",
            "azureml": "/mnt/azureml/cr/j/outputs/ckpt",
            "msrun": "/job/ckpt",
        }.get(self.spec.shape, "/fsx/ckpt/" + self.spec.model)

    def _training(self) -> None:
        rng, ph, spec = self.rng, self.w["phases"], self.spec
        r0 = self.ranks[0]
        leads = [r for r in self.ranks if r.local == 0]
        total = spec.resume + spec.steps
        last_t = self.train_start
        bar_buf: list[str] = []
        slow_from = self.fault.t - 400 if self.fault and self.fault.kind.slow else float("inf")
        for step, t in self.step_times:
            loss = 2.9 * (0.9997**step) + 1.4 + rng.uniform(-0.05, 0.05)
            if spec.framework == "hf" and step % 5 == 0:
                pct = int(100 * (step - spec.resume) / spec.steps)
                bar = ("█" * (pct // 10)).ljust(10)
                bar_buf.append(
                    _fill(
                        ph["tqdm"],
                        {
                            "pct3": f"{pct:3d}",
                            "bar": bar,
                            "step": step - spec.resume,
                            "steps": spec.steps,
                            "elapsed": _hms(t - self.train_start),
                            "remain": _hms((spec.steps - step + spec.resume) * spec.step_secs),
                            "spit": f"{spec.step_secs:.2f}",
                        },
                    )
                )
            if step % spec.log_every == 0:
                v = {
                    "step": step,
                    "skipped": rng.randint(0, 3),
                    "lr": f"{3e-4 * (1 - step / (total * 1.2)):.4e}",
                    "micro": step * 4,
                    "sps": f"{rng.uniform(40, 44):.2f}",
                    "csps": f"{rng.uniform(35, 48):.2f}",
                    "mem": f"{rng.uniform(30, 34):.2f}",
                    "maxmem": f"{rng.uniform(60, 70):.2f}",
                    "loss": f"{loss:.4f}",
                    "gnorm": f"{rng.uniform(0.2, 1.5):.3f}",
                    "epoch": f"{step / total:.2f}",
                    "epoch_i": 1 + step * 3 // total,
                    "seen": step * 512,
                    "total": total * 512,
                    "pct": int(100 * step / total),
                    "loss6": f"{loss:.6f}",
                    "step5": f"{step:5d}",
                    "total5": f"{total:5d}",
                    "ms": int(spec.step_secs * 1000),
                }
                if bar_buf:
                    self.emit(self.rank_lines[0], 0, t - 0.01, "".join(bar_buf), rank=r0)
                    bar_buf = []
                if spec.framework == "deepspeed":
                    for tpl in ph["train_rank0"][:2]:
                        self.emit(self.rank_lines[0], 0, t, tpl, rank=r0, extra=v)
                elif spec.framework == "hf":
                    self.emit(self.rank_lines[0], 0, t, ph["train_rank0"][2], rank=r0, extra=v)
                elif spec.framework == "horovod":
                    self.emit(self.rank_lines[0], 0, t, ph["train_every_rank"][0], rank=r0, extra=v)
                else:
                    self.emit(self.rank_lines[0], 0, t, ph["train_mindformers"][0], rank=r0, extra=v)
                if step % (spec.log_every * 5) == 0 or t >= slow_from:
                    for r in leads:
                        slow = t >= slow_from and r.node == self.fault.node
                        ms = int(
                            spec.step_secs * 1000 * (rng.uniform(2.5, 4) if slow else rng.uniform(0.97, 1.05))
                        )
                        self.emit(
                            self.rank_lines[r.rank],
                            r.node,
                            t + rng.uniform(0, 0.2),
                            ph["train_node_lead"][0],
                            rank=r,
                            label="indicating" if slow else None,
                            key="slow_steps" if slow else None,
                            extra={
                                "step": step,
                                "ms": ms,
                                "tps": int(4096 * 8 / (ms / 1000)),
                                "mem": f"{rng.uniform(61, 66):.1f}",
                            },
                        )
            if step % 1000 == 0:
                for j, tpl in enumerate(ph["eval"]):
                    self.emit(
                        self.rank_lines[0],
                        0,
                        t + 1 + j * 0.01,
                        tpl,
                        rank=r0,
                        extra={
                            "neval": 2048,
                            "loss": f"{loss + 0.08:.4f}",
                            "runtime": f"{rng.uniform(30, 60):.4f}",
                            "esps": f"{rng.uniform(40, 70):.3f}",
                            "esteps": f"{rng.uniform(5, 9):.3f}",
                            "epoch": f"{step / total:.2f}",
                        },
                    )
                warn = ph["init_repeated_warning"][0]
                if spec.framework == "mindformers":
                    warn = self.w["shapes"]["msrun"]["rank_warn"][0]
                for r in self.ranks:
                    if rng.random() < 0.5:
                        self.emit(self.rank_lines[r.rank], r.node, t + 2, warn, rank=r, err=True)
            if step % self.save_every == 0:
                self._save(step, t)
            last_t = t
        if not self.fault or self.fault.kind.stage == "teardown":
            for r in self.ranks:
                if r.rank == 0 or r.local == 0:
                    for j, tpl in enumerate(ph["finish"]):
                        self.emit(self.rank_lines[r.rank], r.node, last_t + 5 + j, tpl, rank=r)

    def _save(self, step: int, t: float) -> None:
        ph = self.w["phases"]
        self.emit(
            self.rank_lines[0],
            0,
            t + 0.5,
            ph["save"][0],
            rank=self.ranks[0],
            extra={"ckpt_root": self._ckpt_root(), "step": step},
        )
        for r in self.ranks:
            if r.local == 0 or r.rank < 8:
                self.emit(
                    self.rank_lines[r.rank],
                    r.node,
                    t + self.rng.uniform(5, SAVE_SECS - 5),
                    ph["save"][1],
                    rank=r,
                    extra={"mp": f"{r.rank:02d}", "secs": f"{self.rng.uniform(4, 30):.1f}"},
                )

    def _kernel_noise(self) -> None:
        tpls = self.w["shapes"]["mpi"]["syslog_tick"]
        for node in range(len(self.spec.hosts)):
            t = self.rng.uniform(0, 600)
            while t < self.end:
                self.emit(
                    self.kernel[node],
                    node,
                    t,
                    self.rng.choice(tpls),
                    extra={
                        "bus": f"{self.rng.choice([0x0C, 0x4E, 0x8A, 0xC5]):02x}",
                        "sess": self.rng.randint(100, 9999),
                    },
                )
                t += self.rng.uniform(600, 2400)

    # --- the fault ---
    def _fault(self) -> None:
        f, spec, rng = self.fault, self.spec, self.rng
        faulty = self.ranks[f.node * spec.per_node + f.local]
        seq = 10 * (f.step or 3) + rng.randint(0, 9)
        numel = rng.choice([16384000, 110100480, 220084533, 8388608])
        extra = {
            "seq": seq,
            "seq_prev": seq - 1,
            "numel": numel,
            "numel8": numel * 8,
            "step": f.step or 0,
            "tok_path": "/opt/ml/input/data/tokenizer"
            if spec.shape == "sagemaker"
            else "/mnt/models/llama-tok",
            "vm": rng.randint(10**8, 4 * 10**8),
            "rss": rng.randint(5 * 10**7, 2 * 10**8),
            "frss": rng.randint(10**4, 10**6),
            "shm": rng.randint(10**5, 10**7),
            "pgt": rng.randint(10**5, 10**6),
            "ptr": f"{rng.getrandbits(44):011x}",
            "task_id": f"{rng.getrandbits(192):048x}",
            "worker_id": f"{rng.getrandbits(224):056x}",
            "actor_id": f"{rng.getrandbits(128):032x}",
            "bsz": 4,
            "bad_size": 4 * 4096 * 4096 * 3,
            "cpu": rng.randint(0, 95),
            "events": rng.randint(1, 9000),
            "task": rng.randint(1000, 60000),
            "tptr": f"{rng.getrandbits(48):012x}",
            "local_ckpt": f"/tmp/ckpt/global_step{f.step}/mp_rank_{faulty.rank:02d}_model_states.pt",
            "bucket": "llm-train-ckpts",
            "key": f"{spec.model}/global_step{f.step}/mp_rank_{faulty.rank:02d}.pt",
        }
        kpid = rng.randint(30000, 99999)
        for g in f.kind.groups:
            if g.shapes and spec.shape not in g.shapes:
                continue
            for i in range(g.repeat):
                scale = 2 ** (16 - i)
                ex = dict(extra, kpid=kpid, scale=scale, half=scale // 2)
                t = f.t + g.dt + (i * abs(g.dt) / max(g.repeat, 1) if g.repeat > 1 else 0)
                for k, tpl in enumerate(g.lines):
                    self._place(g, faulty, t + k * 0.001, tpl, ex)

    def _place(self, g: Group, faulty: Rank, t: float, tpl: str, ex: dict) -> None:
        err = True
        if g.where == "faulty_kernel":
            self.emit(
                self.kernel[faulty.node], faulty.node, t, tpl, label=g.label, key=g.key, extra=ex, force=True
            )
        elif g.where == "launcher":
            self.emit(self.launcher, 0, t, tpl, label=g.label, key=g.key, extra=ex, force=True, err=err)
        else:
            if g.where == "faulty_agent":  # Ascend's plog; elsewhere the rank's own stderr
                if self.spec.shape == "msrun":
                    targets = [(self.agent[faulty.node], faulty)]
                else:
                    targets = [(self.rank_lines[faulty.rank], faulty)]
            elif g.where == "faulty_rank":
                targets = [(self.rank_lines[faulty.rank], faulty)]
            elif g.where == "all_ranks":
                targets = [(self.rank_lines[r.rank], r) for r in self.ranks]
            elif g.where == "other_ranks":
                targets = [(self.rank_lines[r.rank], r) for r in self.ranks if r.rank != faulty.rank]
            else:
                targets = [
                    (self.rank_lines[r.rank], r) for r in self.ranks if r.local == 0 and r.node != faulty.node
                ]
            for where, r in targets:
                jitter = 0.0 if r is faulty else self.rng.uniform(0, 2)
                self.emit(
                    where,
                    r.node,
                    t + jitter,
                    tpl,
                    rank=r,
                    label=g.label,
                    key=g.key,
                    extra=ex,
                    force=True,
                    err=err,
                )


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}"


def _hms(secs: float) -> str:
    s = int(max(secs, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _config_dump(spec: Spec, rng: random.Random) -> str:
    """A dumped training config (one very long line), as HF's TrainingArguments repr or Megatron's args."""
    layers = {
        f"model.layers.{i}.{p}": rng.choice(["bf16", "fp32"])
        for i in range(rng.randint(40, 80))
        for p in ("self_attn.q_proj", "self_attn.k_proj", "mlp.gate_proj", "mlp.down_proj")
    }
    cfg = {
        "model": spec.model,
        "seq_length": 4096,
        "micro_batch_size": 4,
        "global_batch_size": 512,
        "lr": 3e-4,
        "min_lr": 3e-5,
        "train_iters": spec.resume + spec.steps,
        "seed": spec.seed,
        "save_interval": 500,
        "eval_interval": 1000,
        "log_interval": spec.log_every,
        "precision_map": layers,
    }
    return json.dumps(cfg, separators=(",", ":"))
