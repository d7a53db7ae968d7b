"""The normal course of a generated job: init, model loading, data loading, training iterations with
periodic checkpoints, teardown (families.yaml's blocks), stopping early where a fault strikes."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from engine.bench.othergen.job import Job
from engine.bench.othergen.templates import load

STAGES = ("init", "model_loading", "data_loading", "training", "checkpointing", "teardown")
AGENT_WRITERS = ("agent", "agents", "first_agent", "scheduler", "agents_others")


@dataclass
class Plan:
    resume: bool
    start_it: int
    iters: int  # the configured number of training iterations (shown in iteration lines)
    end_it: int  # history: the last iteration run; failed: the iteration the fault strikes in
    period: float  # seconds per iteration
    log_interval: int
    save_interval: int
    stop: str | None = None  # the stage the fault strikes in (None: run to a normal end)
    before_workers: bool = False  # the fault strikes before any worker starts (rendezvous)
    spike_from: int | None = None  # iterations from here on show a loss spike (before a NaN)
    last: dict | None = None  # the values of the last iteration run (the final summary shows them)


def run(job: Job, plan: Plan, rng: random.Random) -> float:
    """Write the job's normal lines up to the fault (or to its end); returns the moment of the fault."""
    fam = job.fam
    t = 0.0
    t = _blocks(job, fam["init"], t, rng, cut=plan.stop == "init",
                only_agents=plan.before_workers, plan=plan)
    if plan.stop == "init":
        return t + rng.uniform(0.5, 3)
    t += rng.uniform(5, 40)
    t = _blocks(job, fam["model_loading"], t, rng, cut=plan.stop == "model_loading", plan=plan)
    if plan.stop == "model_loading":
        return t + rng.uniform(0.2, 5)
    t += rng.uniform(2, 20)
    t = _blocks(job, fam["data_loading"], t, rng, cut=plan.stop == "data_loading", plan=plan)
    if plan.stop == "data_loading":
        return t + rng.uniform(0.05, 2)
    t = _train(job, plan, t, rng)
    if plan.stop in ("training", "checkpointing"):
        return t
    t += rng.uniform(1, 30)
    blocks = fam["teardown"]
    if plan.stop == "teardown":  # the workers die before their launcher can report success
        blocks = [b for b in blocks if b["who"] not in AGENT_WRITERS]
    _blocks(job, blocks, t, rng, cut=False, plan=plan, values=plan.last)
    return t + rng.uniform(1, 10)


def _blocks(job: Job, blocks: list[dict], t: float, rng: random.Random, *, cut: bool, plan: Plan,
            only_agents: bool = False, values: dict | None = None) -> float:
    """Emit `blocks` from `t` on. With `cut` the fault strikes in this stage: the blocks before the one
    marked `cut: true` (else the last) in full, the first half of that one, nothing after it."""
    todo = [b for b in blocks if ("resume" not in b or b["resume"] == plan.resume)
            and (not only_agents or b["who"] in AGENT_WRITERS)]
    if cut:
        marked = [i for i, b in enumerate(todo) if b.get("cut")]
        stop = marked[0] if marked else len(todo) - 1
        todo = todo[: stop + 1]
    for n, block in enumerate(todo):
        lines = block["lines"]
        if cut and n == len(todo) - 1:
            lines = lines[: math.ceil(len(lines) / 2)]
        t += block.get("after", 0)
        t = job.emit(job.select(block["who"]), block["stream"], lines, t, gap=rng.uniform(0.001, 0.4),
                     extra={"start_it": plan.start_it, "iters": plan.iters, **(values or {})},
                     wrap=block["who"] not in AGENT_WRITERS)
        t += rng.uniform(0.2, 6)
    return t


def _train(job: Job, plan: Plan, t: float, rng: random.Random) -> float:
    fam = job.fam
    style = fam["iteration"]
    t_begin = t
    for it in range(plan.start_it + 1, plan.end_it + 1):
        step = plan.period * rng.uniform(0.95, 1.08)
        t += step
        saving = it % plan.save_interval == 0
        if it == plan.end_it and plan.stop == "training":
            return t - step * rng.uniform(0.1, 0.7)
        values = _values(plan, it, step, t - t_begin, rng, spike=plan.spike_from is not None
                         and it >= plan.spike_from)
        plan.last = values
        if it % plan.log_interval == 0:
            for line in fam["iteration_lines"]:
                job.emit([job.logger], "stdout", [line], t, extra=values)
            for line in fam.get("ds_lines", []):
                job.emit([job.ranks[0]], "stdout", [line], t + 0.001, extra=values)
            if style == "hf":
                _tqdm(job, plan, it, t, values)
        if saving:
            if it == plan.end_it and plan.stop == "checkpointing":
                first = [b for b in fam["checkpoint"] if not b.get("after")]
                return _blocks(job, first, t + 0.05, rng, cut=False, plan=plan, values=values)
            t = _blocks(job, fam["checkpoint"], t + 0.05, rng, cut=False, plan=plan, values=values)
    return t


def _tqdm(job: Job, plan: Plan, it: int, t: float, values: dict) -> None:
    """tqdm's progress bar on rank 0's stderr: `\\r` updates without a newline."""
    done = it - plan.start_it
    total = plan.iters
    pct = int(100 * it / total)
    bar = "█" * (pct // 10) + ("▍" if pct % 10 >= 5 else " ") + " " * (9 - pct // 10)
    per = plan.period
    elapsed = done * per
    remain = (total - it) * per
    text = f"\r{pct:3d}%|{bar[:10]}| {it}/{total} [{_hms(elapsed)}<{_hms(remain)}, {per:.2f}s/it]"
    job.add(job.ranks[0], "stderr", t + 0.002, text, nl=False)


def _hms(s: float) -> str:
    s = int(s)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def _values(plan: Plan, it: int, step: float, elapsed: float, rng: random.Random, *, spike: bool) -> dict:
    """The numbers of one iteration line: a decaying loss with noise, warmup then cosine learning rate."""
    frac = it / max(1, plan.iters)
    loss = 2.1 + 6.0 * math.exp(-it / 1500.0) + rng.gauss(0, 0.03)
    gnorm = abs(rng.gauss(0.3, 0.08))
    if spike:
        loss = rng.uniform(6.5, 11.5)
        gnorm = rng.uniform(50000, 3000000)
    warm = min(1.0, it / 2000.0)
    lr = 3e-4 * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))
    gbs = 1024
    return {
        "it": it, "iters": plan.iters, "loss": f"{loss:.6E}", "loss_f": round(loss, 4), "lr": f"{lr:.3E}",
        "lr_f": repr(lr),
        "gnorm": f"{gnorm:.3f}", "ms": f"{step * 1000:.1f}", "sec": f"{step:.2f}",
        "lscale": rng.choice(["1.0", "1.0", "65536.0", "32768.0"]), "samples": it * gbs,
        "tokens": it * gbs * 2048, "sps": f"{gbs / step:.3f}", "tflops": f"{rng.uniform(120, 180):.2f}",
        "mem_alloc": f"{rng.uniform(10, 40):.2f}", "mem_max": f"{rng.uniform(40, 78):.2f}",
        "epoch": round(frac * 3, 2), "micro": it * 8, "elapsed": elapsed,
    }


def noise(job: Job, t_end: float, rng: random.Random) -> None:
    """Benign warnings on random ranks and kernel messages on every node, before `t_end`."""
    fam = job.fam
    for _ in range(rng.randint(3, 9)):
        block = rng.choice(fam["noise"])
        ranks = job.select(block["who"])
        r = rng.choice(ranks)
        job.emit([r], block["stream"], [rng.choice(block["lines"])], rng.uniform(0, max(1.0, t_end)))
    kernel_noise = load("families")["kernel_noise"]
    for node in job.nodes:
        for _ in range(rng.randint(1, 3)):
            job.kernel(node.ranks[0], rng.uniform(-600, max(1.0, t_end)), [rng.choice(kernel_noise)])
