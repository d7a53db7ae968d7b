"""What each real-run case is: fault kind, program style, nodes, clocks, fault placement, split."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

STYLES = ("ddp", "megatron", "hf", "lightning", "accelerate", "nanogpt", "fabric", "titan", "deepspeed",
          "fsdp2", "tp", "tune")
# held out: only wave 3 (cases -5, -6) and the development wave 4 (-7 to -10) run them
WAVE3_STYLES = ("accelerate", "nanogpt")
# held out: only wave 5 (cases -11, -12) runs them
WAVE5_STYLES = ("fabric", "titan")
# held out: only wave 6 (cases -13, -14) runs them
WAVE6_STYLES = ("deepspeed", "fsdp2")
# held out: only wave 7 (cases -15, -16) runs them
WAVE7_STYLES = ("tp", "tune")
NNODES = 4
NPROC = 2
STEPS = 24
SAVE_EVERY = 8
VOCAB = 96  # the tiny model's vocabulary and sample length (passed to the programs)
SEQ = 17
# node clocks: (TZ, timestamp format of the programs' own lines)
CLOCKS = (("Asia/Shanghai", "iso_offset"), ("UTC", "iso_z"), ("UTC", "naive"),
          ("Asia/Shanghai", "naive"), ("America/Los_Angeles", "iso_offset"))
NODE_SCHEMES = ("gpu-node-{:02d}", "worker-{}", "dgx-a{:03d}", "node{:03d}")


@cache
def kinds() -> dict:
    return yaml.safe_load((Path(__file__).parent / "kinds.yaml").read_text())


def kind_spec(kind: str) -> dict:
    spec = kinds()["kinds"].get(kind)
    if spec is None:
        raise ValueError(f"unknown real-run fault kind {kind!r} (one of {', '.join(kinds()['kinds'])})")
    return spec


def _hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def assign_splits(kind_of: dict[str, str]) -> dict[str, str]:
    """``dev`` or ``test`` for every case name, fixed by hashes before anyone tunes: a kind's cases
    in hash order alternate between the halves (from a side its own hash picks), so every kind with
    two or more cases has cases in both."""
    by_kind: dict[str, list[str]] = {}
    for name, kind in kind_of.items():
        by_kind.setdefault(kind, []).append(name)
    out = {}
    for kind, names in by_kind.items():
        first = _hash(kind) % 2
        for i, name in enumerate(sorted(names, key=_hash)):
            out[name] = ("dev", "test")[(i + first) % 2]
    return out


@dataclass
class RunPlan:
    name: str
    style: str
    kind: str | None  # None: a succeeded history run
    seed: int
    nodes: list[str]
    clocks: list[tuple[str, str]]
    layout: str  # "console": one launcher output per node; "logdir": torchrun --log-dir per-rank files;
    # "slurm": every rank's lines merged into one file per node behind srun -l's "N: " (global rank)
    fault_node: int | None = None
    fault_locals: list[int] = field(default_factory=list)
    scope: str = "all"  # all | rank0 | local
    step: int = -1
    variant: int = 0
    steps: int = STEPS
    save_every: int = SAVE_EVERY
    prefix: str = "default"  # the launcher's console prefix of rank lines: [defaultN]: or [rankN]: (global)
    wave: int = 1  # 1: the first corpus (cases -1, -2); 2: held-out growth (-3, -4); 3: new styles (-5, -6);
    # 4: development runs of the new styles (-7 to -10), never committed as fixtures; 5: the styles of
    # WAVE5_STYLES and elastic restarts (-11, -12); 6: WAVE6_STYLES (-13, -14); 7: WAVE7_STYLES (-15, -16)
    restarts: int = 0  # torchrun --max-restarts: the agents restart the workers this many times
    monitor_interval: float = 0.5  # torchrun --monitor-interval (seconds)

    @property
    def world(self) -> int:
        return len(self.nodes) * NPROC


def _nodes(rng: random.Random) -> list[str]:
    scheme = rng.choice(NODE_SCHEMES)
    first = rng.randrange(1, 60)
    return [scheme.format(first + i) for i in range(NNODES)]


def _step(rng: random.Random, when: str, steps: int, every: int) -> int:
    saves = [s for s in range(every, steps, every)]
    if when == "save":
        return rng.choice(saves)
    if when == "after_save":
        return rng.choice(saves) + 1
    if when == "mid":
        return rng.choice([s for s in range(4, steps - 2) if s % every and (s - 1) % every])
    return -1


# wave 2 (cases numbered 3 and on): other step counts, save periods, console prefixes and timestamps
WAVE2_STEPS = (16, 20, 30)
WAVE2_SAVE_EVERY = (5, 6, 7)
WAVE2_UNSTAMPED = ("ddp", "lightning")  # styles whose own lines may carry no timestamp at all


def _wave2(p: RunPlan) -> None:
    """Settings of a held-out case, from their own hash of its name (the wave-1 draws stay as they were)."""
    w = random.Random(f"l4-realrun-w2:{p.name}")
    p.wave = 2
    p.steps = w.choice(WAVE2_STEPS)
    p.save_every = w.choice(WAVE2_SAVE_EVERY)
    p.prefix = w.choice(["default", "rank"])
    if p.style in WAVE2_UNSTAMPED and w.random() < 0.55:
        p.clocks = [(tz, "none") for tz, _ in p.clocks]


# wave 3 (cases 5 and 6, the styles of WAVE3_STYLES only): other steps, save periods, zones and node names
WAVE3_STEPS = (18, 22, 26)
WAVE3_SAVE_EVERY = (4, 9, 10)
WAVE3_CLOCKS = (("Europe/Berlin", "iso_offset"), ("Asia/Kolkata", "iso_offset"), ("UTC", "iso_z"),
                ("America/New_York", "naive"), ("Asia/Tokyo", "naive"))
WAVE3_NODE_SCHEMES = ("ip-10-1-{}-23", "hgx-{:04d}", "trn-{:02d}", "cn{:03d}")
WAVE3_UNSTAMPED = ("nanogpt",)  # its own lines are plain print()s: no time at all


def _scheme_nodes(w: random.Random, schemes: tuple[str, ...]) -> list[str]:
    scheme = w.choice(schemes)
    first = w.randrange(1, 90)
    return [scheme.format(first + i) for i in range(NNODES)]


def _wave3(p: RunPlan, nodes_given: bool, salt: str = "l4-realrun-w3", wave: int = 3) -> None:
    """Settings of a wave-3 case, every one from its own hash of the name (``salt``: the dev wave of cases
    -7 and on draws the same kinds of settings from another hash, so they differ from wave 3's)."""
    w = random.Random(f"{salt}:{p.name}")
    p.wave = wave
    if not nodes_given:
        p.nodes = _scheme_nodes(w, WAVE3_NODE_SCHEMES)
    p.clocks = [w.choice(WAVE3_CLOCKS) for _ in p.nodes]
    if p.style in WAVE3_UNSTAMPED:
        p.clocks = [(tz, "none") for tz, _ in p.clocks]
    p.layout = w.choice(["console", "logdir"])
    p.steps = w.choice(WAVE3_STEPS)
    p.save_every = w.choice(WAVE3_SAVE_EVERY)
    p.prefix = w.choice(["default", "rank"])


# wave 5 (cases 11 and 12, the styles of WAVE5_STYLES only): other steps, saves, zones, node names, and
# torchrun --max-restarts 1 on about a third of the cases whose failure torchrun restarts
WAVE5_STEPS = (14, 20, 28)
WAVE5_SAVE_EVERY = (4, 6, 7)
WAVE5_CLOCKS = (("Australia/Sydney", "iso_offset"), ("America/Chicago", "iso_offset"), ("UTC", "iso_z"),
                ("Europe/London", "naive"), ("Asia/Singapore", "naive"))
WAVE5_NODE_SCHEMES = ("gpu-a100-{:02d}", "node-{:03d}.cluster.local", "h100-{:03d}", "compute-0-{}")
WAVE5_UNSTAMPED = ("fabric",)  # fabric.print and Fabric's messages carry no time: only torchrun's lines do
# failures of the agent itself (no rendezvous, a held port, the agent told to stop): nothing to restart
NO_RESTART_KINDS = ("rendezvous_timeout", "port_in_use", "sigterm_preempt")
# kinds with a second wave-5 case (-12, in the other new style): the first 7 in the hash order of the name
WAVE5_SECOND = 7


def _wave5(p: RunPlan, nodes_given: bool) -> None:
    """Settings of a wave-5 case, every one from its own hash of the name (salt ``l4-realrun-w5``)."""
    w = random.Random(f"l4-realrun-w5:{p.name}")
    p.wave = 5
    if not nodes_given:
        p.nodes = _scheme_nodes(w, WAVE5_NODE_SCHEMES)
    p.clocks = [w.choice(WAVE5_CLOCKS) for _ in p.nodes]
    if not any(fmt == "iso_offset" for _, fmt in p.clocks):
        p.clocks[w.randrange(len(p.clocks))] = WAVE5_CLOCKS[0]
    if p.style in WAVE5_UNSTAMPED:
        p.clocks = [(tz, "none") for tz, _ in p.clocks]
    p.layout = w.choice(["console", "logdir"])
    p.steps = w.choice(WAVE5_STEPS)
    p.save_every = w.choice(WAVE5_SAVE_EVERY)
    p.prefix = w.choice(["default", "rank"])
    if p.kind not in NO_RESTART_KINDS and w.random() < 0.55:
        p.restarts = 1
        if p.layout == "console":  # global ranks may move between attempts: the console keeps local ones
            p.prefix = "default"


def wave5_second(kind: str) -> bool:
    """Whether ``kind`` has a second wave-5 case (-12)."""
    order = sorted(kinds()["kinds"], key=lambda k: _hash(f"l4-realrun-w5-second:{k}"))
    return kind in order[:WAVE5_SECOND]


# wave 6 (cases 13 and 14, the styles of WAVE6_STYLES only): other steps, saves, zones and node names, a
# SLURM-like console (srun -l's "N: " prefix) on about a third of the cases, and on another third an elastic
# restart whose resumed attempt reaches the same fault again; faults at the final save and in the first step
# after a resume
WAVE6_STEPS = (15, 21, 25)
WAVE6_SAVE_EVERY = (3, 5, 8)
WAVE6_CLOCKS = (("Asia/Seoul", "iso_offset"), ("Europe/Paris", "iso_offset"), ("UTC", "iso_z"),
                ("America/Denver", "naive"), ("Asia/Dubai", "naive"))
WAVE6_NODE_SCHEMES = ("dgx-h100-{:02d}", "ip-10-0-{}-{}", "nid{:06d}", "p5-st-48xl-{}")
WAVE6_ZONED = ("deepspeed",)  # DeepSpeed's logger writes logging's naive local asctime: one zone per job
# kinds after which every rank dies within the collective timeout, so that every agent restarts the workers
# with the same restart count and the resumed attempt can reach the fault again (a stopped or slow rank
# stays alive, agent-level failures are not restarted, a teardown failure finds the others past training)
WAVE6_RESTART_KINDS = ("exception_step", "nan_loss", "host_oom", "disk_full_ckpt", "ckpt_permission",
                       "dataloader_worker_crash", "fail_after_ckpt", "rank_sigkill")
# kinds with a second wave-6 case (-14, in the other new style): the first 7 in the hash order of the name
WAVE6_SECOND = 7
# torchrun --monitor-interval of a restarted case: longer than the collective timeout, so that an agent sees
# its own workers failed before it sees the restarted node waiting at the rendezvous
WAVE6_MONITOR_S = 12.0


def _node6(w: random.Random) -> list[str]:
    scheme = w.choice(WAVE6_NODE_SCHEMES)
    first = w.randrange(1, 90)
    if scheme.startswith("ip-"):
        return [scheme.format(w.randrange(1, 250), first + 10 * i) for i in range(NNODES)]
    return [scheme.format(first + i) for i in range(NNODES)]


def _wave6(p: RunPlan, nodes_given: bool) -> None:
    """Settings of a wave-6 case, every one from its own hash of the name (salt ``l4-realrun-w6``)."""
    w = random.Random(f"l4-realrun-w6:{p.name}")
    p.wave = 6
    if not nodes_given:
        p.nodes = _node6(w)
    if p.style in WAVE6_ZONED:
        tz = w.choice(WAVE6_CLOCKS)[0]
        p.clocks = [(tz, "naive") for _ in p.nodes]
    else:
        p.clocks = [w.choice(WAVE6_CLOCKS + (("UTC", "none"),)) for _ in p.nodes]
    p.steps = w.choice(WAVE6_STEPS)
    p.save_every = w.choice(WAVE6_SAVE_EVERY)
    p.prefix = w.choice(["default", "rank"])
    shape = w.random()
    if p.kind in WAVE6_RESTART_KINDS and shape < 0.8:
        p.restarts = 1
        p.monitor_interval = WAVE6_MONITOR_S
        p.layout = w.choice(["console", "logdir"])
        if p.layout == "console":  # global ranks may move between attempts: the console keeps local ones
            p.prefix = "default"
    elif w.random() < 0.4:
        p.layout, p.prefix = "slurm", "rank"  # the prefixer reads torchrun's [rankN]: (global rank)
    else:
        p.layout = w.choice(["console", "logdir"])


def wave6_second(kind: str) -> bool:
    """Whether ``kind`` has a second wave-6 case (-14)."""
    order = sorted(kinds()["kinds"], key=lambda k: _hash(f"l4-realrun-w6-second:{k}"))
    return kind in order[:WAVE6_SECOND]


def _step6(p: RunPlan, rng: random.Random, when: str) -> int:
    """The fault step of a wave-6 case: a save kind's fault at the final save on about half; a restarted
    case's mid-step fault after the first save (so the resumed attempt reaches it again), in the first step
    after a save on about half (the resumed attempt's first step)."""
    w = random.Random(f"l4-realrun-w6-step:{p.name}")
    saves = [s for s in range(p.save_every, p.steps, p.save_every)]
    if when == "save" and w.random() < 0.5:
        return p.steps  # the save at the end of training
    if when == "save" and p.restarts and len(saves) > 1:
        return w.choice(saves[1:])  # a checkpoint to resume from before it
    if when == "mid" and p.restarts:
        if w.random() < 0.5:
            return w.choice(saves) + 1
        return w.choice([s for s in range(p.save_every + 2, p.steps - 1) if s % p.save_every
                         and (s - 1) % p.save_every])
    return _step(rng, when, p.steps, p.save_every)


# wave 7 (cases 15 and 16, the styles of WAVE7_STYLES only): other steps, saves, zones and node names; the
# tune style's own lines carry no time (logging's default format), the tp style's loguru-like ones the node's
WAVE7_STEPS = (13, 19, 23)
WAVE7_SAVE_EVERY = (4, 6, 9)
WAVE7_CLOCKS = (("Asia/Hong_Kong", "iso_offset"), ("Europe/Madrid", "iso_offset"), ("UTC", "iso_z"),
                ("America/Sao_Paulo", "naive"), ("Pacific/Auckland", "naive"))
WAVE7_NODE_SCHEMES = ("a3mega-{:04d}", "sc-gpu{:03d}", "hpc-{:02d}.local", "tp-worker-{}")
WAVE7_UNSTAMPED = ("tune",)
# kinds with a second wave-7 case (-16, in the other new style): the first 7 in the hash order of the name
WAVE7_SECOND = 7


def _wave7(p: RunPlan, nodes_given: bool) -> None:
    """Settings of a wave-7 case, every one from its own hash of the name (salt ``l4-realrun-w7``)."""
    w = random.Random(f"l4-realrun-w7:{p.name}")
    p.wave = 7
    if not nodes_given:
        p.nodes = _scheme_nodes(w, WAVE7_NODE_SCHEMES)
    p.clocks = [w.choice(WAVE7_CLOCKS) for _ in p.nodes]
    if p.style in WAVE7_UNSTAMPED:
        p.clocks = [(tz, "none") for tz, _ in p.clocks]
    p.steps = w.choice(WAVE7_STEPS)
    p.save_every = w.choice(WAVE7_SAVE_EVERY)
    p.prefix = w.choice(["default", "rank"])
    if w.random() < 0.3:
        p.layout, p.prefix = "slurm", "rank"  # the prefixer reads torchrun's [rankN]: (global rank)
    else:
        p.layout = w.choice(["console", "logdir"])


def wave7_second(kind: str) -> bool:
    """Whether ``kind`` has a second wave-7 case (-16)."""
    order = sorted(kinds()["kinds"], key=lambda k: _hash(f"l4-realrun-w7-second:{k}"))
    return kind in order[:WAVE7_SECOND]


def split_of(name: str) -> str:
    """The half of a wave-2 case, fixed before the engine sees it: ``dev`` when the first byte of the
    sha256 of its name is even."""
    return ("dev", "test")[hashlib.sha256(name.encode()).digest()[0] % 2]


def plan_run(name: str, style: str, kind: str | None, seed: int, nodes: list[str] | None = None,
             variant: int | None = None) -> RunPlan:
    rng = random.Random(f"l4-realrun:{name}:{seed}")
    nodes_given = nodes is not None
    nodes = nodes or _nodes(rng)
    clocks = [rng.choice(CLOCKS) for _ in nodes]
    if not any(fmt == "iso_offset" and tz != "UTC" for tz, fmt in clocks):
        clocks[rng.randrange(len(clocks))] = CLOCKS[0]
    p = RunPlan(name=name, style=style, kind=kind, seed=seed, nodes=nodes, clocks=clocks,
                layout=rng.choice(["console", "logdir"]))
    if seed >= 15 and kind is not None:
        _wave7(p, nodes_given)
    elif seed >= 13 and kind is not None:
        _wave6(p, nodes_given)
    elif seed >= 11 and kind is not None:
        _wave5(p, nodes_given)
    elif seed >= 7 and kind is not None:  # development runs of the new styles: their own hash salt
        _wave3(p, nodes_given, salt="l4-realrun-w4", wave=4)
    elif seed >= 5 and kind is not None:
        _wave3(p, nodes_given)
    elif seed >= 3 and kind is not None:
        _wave2(p)
    if kind is None:
        if style in WAVE6_ZONED:  # a history run logs the way its style's cases do
            p.clocks = [(tz, "naive") for tz, _ in p.clocks]
        return p
    spec = kind_spec(kind)
    if style not in spec["styles"]:
        raise ValueError(f"kind {kind!r} has no {style!r} program (styles: {', '.join(spec['styles'])})")
    p.variant = rng.randrange(1000) if variant is None else variant
    p.fault_node = {"host": 0, "other": rng.randrange(1, len(nodes))}.get(spec.get("node", "any"),
                                                                          rng.randrange(len(nodes)))
    p.scope = {"one": "local", "node": "local", "rank0": "rank0", "all": "all"}[spec["ranks"]]
    p.fault_locals = [rng.randrange(NPROC)] if spec["ranks"] == "one" else list(range(NPROC))
    p.step = _step6(p, rng, spec["step"]) if p.wave == 6 else _step(rng, spec["step"], p.steps, p.save_every)
    return p


def case_plans(kinds_wanted: list[str] | None = None, styles_wanted: list[str] | None = None,
               per_kind: int = 2) -> list[RunPlan]:
    """The corpus: ``per_kind`` cases of every kind, on its styles in turn (named ``<kind>-<style>-<n>``).
    Cases 1 to 4 take the kind's styles of the first waves in turn, cases 5 and on its wave-3 styles (from
    a side the kind's hash picks, so that both new styles get about half); cases 7 and on are development
    runs of those styles with settings from another hash (wave 4, up to -10); cases 11 and 12 run the styles
    of WAVE5_STYLES (wave 5: -11 for every kind, -12 in the other new style for the kinds `wave5_second`
    picks); cases 13 and 14 those of WAVE6_STYLES alike (wave 6, `wave6_second`), cases 15 and 16 those of
    WAVE7_STYLES (wave 7, `wave7_second`)."""
    all_kinds = kinds()["kinds"]
    chosen = kinds_wanted or list(all_kinds)
    for k in chosen:
        kind_spec(k)
    styles = styles_wanted or list(STYLES)
    bad = [s for s in styles if s not in STYLES]
    if bad:
        raise ValueError(f"unknown styles {bad} (one of {', '.join(STYLES)})")
    plans = []
    for kind in chosen:
        allowed = [s for s in all_kinds[kind]["styles"] if s in styles]
        old = [s for s in allowed if s not in WAVE3_STYLES + WAVE5_STYLES + WAVE6_STYLES + WAVE7_STYLES]
        new = [s for s in allowed if s in WAVE3_STYLES]
        new5 = [s for s in allowed if s in WAVE5_STYLES]
        new6 = [s for s in allowed if s in WAVE6_STYLES]
        new7 = [s for s in allowed if s in WAVE7_STYLES]
        for n in range(per_kind):
            if n < 4 and not old or 4 <= n < 10 and not new or 10 <= n < 12 and not new5 \
                    or 12 <= n < 14 and not new6 or n >= 14 and not new7:
                continue
            if n >= 16 or n == 11 and not wave5_second(kind) or n == 13 and not wave6_second(kind) \
                    or n == 15 and not wave7_second(kind):
                continue
            if n >= 14:
                style = new7[(n - 14 + _hash(f"w7:{kind}")) % len(new7)]
            elif n >= 12:
                style = new6[(n - 12 + _hash(f"w6:{kind}")) % len(new6)]
            elif n >= 10:
                style = new5[(n - 10 + _hash(f"w5:{kind}")) % len(new5)]
            else:
                style = old[n % len(old)] if n < 4 else new[(n - 4 + _hash(kind)) % len(new)]
            plans.append(plan_run(f"{kind}-{style}-{n + 1}", style, kind, seed=n + 1, variant=n))
    return plans
