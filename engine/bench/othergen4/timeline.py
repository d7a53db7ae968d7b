"""What each process of one job prints and when (true UTC seconds from the job's start), before any shape
gives it a file, a prefix or a clock. A failed job gets its fault's lines (`catalogue.Kind`), tagged with
their truth role; a succeeded job (history) runs to its end."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from engine.bench.othergen4.catalogue import Kind, noise, split_level


@dataclass
class Msg:
    t: float
    template: str
    level: str | None  # None: a raw stderr line
    role: str | None  # truth role (catalogue.ROLES, or "cascade" for consequences); None for noise
    ctx: dict


@dataclass
class Rank:
    rank: int
    node: int
    lrank: int
    pid: int


@dataclass
class Job:
    name: str
    framework: str
    nodes: list[str]
    rpn: int
    ranks: list[Rank]
    values: dict  # case-wide placeholder values
    kind: Kind | None = None
    fault_ranks: list[int] = field(default_factory=list)
    fault_node: int | None = None
    fault_step: int | None = None
    rank_msgs: dict[int, list[Msg]] = field(default_factory=dict)
    node_msgs: dict[int, list[Msg]] = field(default_factory=dict)  # kernel and system log
    agent_msgs: dict[int, list[Msg]] = field(default_factory=dict)  # the node's launcher agent

    @property
    def world(self) -> int:
        return len(self.ranks)


TIMEOUT = {"torch": 600.0, "paddle": 1800.0, "jax": 95.0}


def _metrics(rng: random.Random, step: int, total: int) -> dict:
    frac = step / max(total, 1)
    loss = 2.1 + 6.0 * (1 - frac) ** 3 + rng.uniform(-0.08, 0.08)
    return {
        "step": step,
        "loss": loss,
        "lr": f"{3e-4 * min(1.0, step / 200 + 0.01):.4e}",
        "gnorm": rng.uniform(0.2, 1.4),
        "mem": rng.uniform(52, 71),
        "memp": rng.uniform(66, 89),
        "memr": rng.uniform(72, 78),
        "tps": rng.randint(2800, 3400),
        "tfl": rng.uniform(300, 390),
        "mfu": rng.uniform(31, 40),
        "sps": rng.uniform(10, 40),
        "stps": rng.uniform(0.2, 1.0),
        "secs": rng.uniform(0.4, 9.0),
        "prog": frac,
        "eloss": loss + 0.07,
        "ppl": 2.718 ** min(loss, 9),
        "acc": rng.uniform(0.3, 0.6),
        "shardno": rng.randint(0, 4095),
        "ms": rng.randint(800, 4000),
    }


def _lines(
    templates: list[str], t: float, gap: float, role: str | None, ctx: dict, rng: random.Random
) -> tuple[list[Msg], float]:
    out = []
    for tpl in templates:
        level, body = split_level(tpl)
        out.append(Msg(t, body, level, role, ctx))
        t += rng.uniform(0.0, gap)
    return out, t


def _traceback_first(frames: list[str]) -> bool:
    return bool(frames) and "Traceback (most recent call last)" in frames[0]


def build(
    job: Job,
    rng: random.Random,
    seconds_per_step: float,
    log_every: int,
    save_every: int,
    eval_every: int,
    rstep: int,
    total: int,
) -> None:
    """Fill `job`'s messages: every rank's run up to the fault (or the end), the fault's lines, the
    consequences on every other rank and on the launcher agents."""
    fw = job.framework
    nz = noise()[fw]
    kind = job.kind
    stage = kind.stage if kind else None
    words = kind.wording[fw] if kind else {}
    fault_ranks = set(job.fault_ranks)
    if job.fault_ranks:
        fr = job.ranks[job.fault_ranks[0]]
        job.values.update(
            {
                "frank": fr.rank,
                "fhost": job.nodes[fr.node],
                "flrank": fr.lrank,
                "fpid": fr.pid,
                "fip": job.values["ips"][fr.node],
            }
        )
    tf: float | None = None  # the fault's time (the faulty rank's last line)
    stopped: dict[int, float] = {}
    # the fault step of a training/checkpointing kind is fixed by the caller (job.fault_step)
    for r in job.ranks:
        ctx = {
            **job.values,
            "rank": r.rank,
            "lrank": r.lrank,
            "host": job.nodes[r.node],
            "pid": r.pid,
            "npid": r.pid + rng.randint(40, 400),
            "ip": job.values["ips"][r.node],
            "busid": f"{0x18 + 0x20 * r.lrank:x}000",
            "hexa": f"{rng.getrandbits(48):x}",
            "hexb": f"{rng.getrandbits(60):x}",
            "seed2": 42 + r.rank,
            "tid": job.values["tids"][r.rank],
            "lrank0": r.lrank * 8,
        }
        msgs: list[Msg] = []
        t = 4.0 + rng.uniform(0, 3) + r.node * 0.3
        mine = r.rank in fault_ranks

        def fault_here(t: float, ctx: dict = ctx, mine: bool = mine, msgs: list[Msg] = msgs) -> float:
            """The fault's lines on this rank at t (precursors before); the time it stopped."""
            if not mine:
                return t
            pre, t2 = _lines(words["precursor"], t - 2.5, 1.0, "precursor", ctx, rng)
            frames = words["frames"]
            if _traceback_first(frames):
                seq = [(x, "frames") for x in frames] + [(x, "root") for x in words["root"]]
            else:
                seq = [(x, "root") for x in words["root"]] + [(x, "frames") for x in frames]
            msgs.extend(pre)
            for tpl, role in seq:
                level, body = split_level(tpl)
                msgs.append(Msg(t, body, level, role, ctx))
            return t

        def run(
            templates: list[str], t: float, extra: dict | None = None, ctx: dict = ctx, msgs: list[Msg] = msgs
        ) -> float:
            m, t = _lines(templates, t, 1.5, None, {**ctx, **(extra or {})}, rng)
            msgs.extend(m)
            return t

        base = _metrics(rng, rstep, total)
        start = nz["startup"]
        if stage == "init":
            half = max(1, len(start) // 2)
            t = run(start[:half], t, base)
            tf_r = fault_here(t + 1.0)
            stopped[r.rank] = tf_r if mine else t
            if mine:
                tf = tf_r if tf is None else min(tf, tf_r)
            job.rank_msgs[r.rank] = msgs
            continue
        t = run(start, t, base)
        if r.rank % 7 == 3 and nz["warn"]:
            t = run([nz["warn"][0]], t, base)
        t = run(nz["data"], t, base)
        if stage == "data_loading":
            tf_r = fault_here(t + 2.0)
            stopped[r.rank] = tf_r if mine else t + 2.0
            if mine:
                tf = tf_r if tf is None else min(tf, tf_r)
            job.rank_msgs[r.rank] = msgs
            continue
        if rstep:
            model = nz["model"]
            if stage == "model_loading":
                tf_r = fault_here(t + 3.0)
                t = run(model[:1], t, base) if not mine else t
                stopped[r.rank] = tf_r if mine else t + 3.0
                if mine:
                    tf = tf_r if tf is None else min(tf, tf_r)
                job.rank_msgs[r.rank] = msgs
                continue
            t = run(model, t, base)
        t = run(nz["begin"], t, base)
        t_step0 = t + 30.0  # compilation / warm-up
        end = (
            job.fault_step if job.fault_step is not None and stage in ("training", "checkpointing") else total
        )
        t_fault_rank = None
        for step in range(rstep + 1, end + 1):
            ts = t_step0 + (step - rstep) * seconds_per_step
            if stage == "training" and step == end:
                t_fault_rank = ts - seconds_per_step * 0.5
                break
            if step % log_every == 0:
                msgs.extend(_lines(nz["step"], ts, 0.01, None, {**ctx, **_metrics(rng, step, total)}, rng)[0])
            if step % 97 == 0 and nz["warn"] and r.lrank == 0:
                msgs.extend(_lines(nz["warn"][1:2], ts + 0.2, 0.0, None, {**ctx, **base}, rng)[0])
            if step % save_every == 0:
                if stage == "checkpointing" and step == end:
                    msgs.extend(_lines(nz["save"][:1], ts + 0.5, 0.0, None, {**ctx, **base}, rng)[0])
                    t_fault_rank = ts + 4.0 + rng.uniform(0, 3)
                    break
                msgs.extend(
                    _lines(nz["save"], ts + 0.5, 2.0, None, {**ctx, **_metrics(rng, step, total)}, rng)[0]
                )
            if step % eval_every == 0:
                msgs.extend(
                    _lines(nz["eval"], ts + 6.0, 1.0, None, {**ctx, **_metrics(rng, step, total)}, rng)[0]
                )
        t_end = t_step0 + (end - rstep + 1) * seconds_per_step
        if t_fault_rank is not None:
            tf_r = fault_here(t_fault_rank)
            if mine:
                tf = tf_r if tf is None else min(tf, tf_r)
            stopped[r.rank] = t_fault_rank
        else:
            fin = _metrics(rng, total, total)
            if stage == "teardown" and mine:
                # the end of the run, then the fault in the teardown
                tf_r = fault_here(t_end + 8.0)
                msgs.extend(_lines(nz["finish"][:1], t_end, 0.0, None, {**ctx, **fin}, rng)[0])
                tf = tf_r if tf is None else min(tf, tf_r)
            else:
                msgs.extend(_lines(nz["finish"], t_end, 2.0, None, {**ctx, **fin}, rng)[0])
            stopped[r.rank] = t_end + 10.0
        job.rank_msgs[r.rank] = msgs
    for msgs in job.rank_msgs.values():
        msgs.sort(key=lambda m: m.t)
    _agents_and_nodes(job, rng, tf, stopped)


def _agents_and_nodes(job: Job, rng: random.Random, tf: float | None, stopped: dict[int, float]) -> None:
    fw = job.framework
    nz = noise()
    kind = job.kind
    words = kind.wording[fw] if kind else {}
    scope = kind.scope if kind else None
    for i, node in enumerate(job.nodes):
        ctx = {
            **job.values,
            "host": node,
            "pid": job.values["agent_pids"][i],
            "tid": job.values["tids"][0],
            "rpn": job.rpn,
            "spid": 600 + i * 13,
            "spid2": 810 + i,
        }
        boot, _ = _lines(nz["kernel"], -3600.0 * (2 + i % 5), 3.0, None, ctx, rng)  # at boot
        sysl, _ = _lines(nz["system"], 0.5, 2.0, None, ctx, rng)
        job.node_msgs[i] = boot + sysl
        start, _ = _lines(nz[fw]["agent_start"], 1.0, 0.3, None, ctx, rng)
        job.agent_msgs[i] = start
    if kind is None or tf is None:
        for i in range(len(job.nodes)):
            t_end = max(stopped[r.rank] for r in job.ranks if r.node == i)
            job.agent_msgs[i] += _lines(
                noise()[fw]["agent_end"], t_end + 1.0, 0.5, None, {**job.values, "host": job.nodes[i]}, rng
            )[0]
        return
    fr = job.ranks[job.fault_ranks[0]]
    fctx = {k: job.values[k] for k in ("frank", "fhost", "flrank", "fpid", "fip")}
    # the faulty node's kernel/system lines (a hung task is reported 2 minutes after it hung)
    if scope != "all" and words["node"]:
        i = fr.node
        ctx = {
            **job.values,
            **fctx,
            "host": job.nodes[i],
            "pid": fr.pid,
            "spid": 600 + i * 13,
            "spid2": 810 + i,
            "kpid": rng.randint(100, 900),
            "tid": job.values["tids"][fr.rank],
        }
        t0 = tf + 122.0 if kind.name.startswith("straggler") else tf - rng.uniform(1.0, 4.0)
        if kind.stage == "init":
            t0 = max(0.2, tf - 2.0)
        job.node_msgs[i] += _lines(words["node"], t0, 0.8, "node", ctx, rng)[0]
    # consequences on every other rank: a timeout later (at once after a node's shutdown or a kill)
    timeout = TIMEOUT[fw]
    if kind.name.startswith("rendezvous") and fw == "torch":
        timeout = 1800.0
    if scope != "all" and kind.stage != "teardown":
        for r in job.ranks:
            if r.rank in job.fault_ranks:
                continue
            ctx = {
                **job.values,
                **fctx,
                "rank": r.rank,
                "lrank": r.lrank,
                "host": job.nodes[r.node],
                "pid": r.pid,
                "tid": job.values["tids"][r.rank],
            }
            t_c = tf + timeout + rng.uniform(0.0, 2.0)
            if kind.name == "spot_preemption" and r.node == fr.node:
                t_c = tf + rng.uniform(0.0, 0.5)
                lines = words["root"] or words["cascade"]
                role = "root" if words["root"] else "cascade"
                job.rank_msgs[r.rank] += _lines(lines, t_c, 0.0, role, ctx, rng)[0]
                stopped[r.rank] = t_c
                continue
            job.rank_msgs[r.rank] += _lines(words["cascade"], t_c, 0.05, "cascade", ctx, rng)[0]
            stopped[r.rank] = t_c
    # the launcher agents: the faulty node's (every node's when every rank raised) names the failure;
    # the others stop their workers
    for i, node in enumerate(job.nodes):
        mine = scope == "all" or i == fr.node
        pid0 = next(r.pid for r in job.ranks if r.node == i)
        ctx = {
            **job.values,
            **fctx,
            "host": node,
            "pid": pid0,
            "tid": job.values["tids"][0],
            "code": _exit_code(words["agent"]),
        }
        if scope == "all":  # every node's agent names its own first worker
            first = next(r for r in job.ranks if r.node == i)
            ctx.update({"frank": first.rank, "flrank": first.lrank, "fpid": first.pid})
        t_a = max(stopped[r.rank] for r in job.ranks if r.node == i) + rng.uniform(0.5, 2.0)
        if mine and words["agent"]:
            job.agent_msgs[i] += _lines(words["agent"], t_a, 0.1, "agent", ctx, rng)[0]
        elif kind.stage == "teardown":  # the other nodes' workers had finished
            job.agent_msgs[i] += _lines(noise()[fw]["agent_end"], t_a, 0.1, None, ctx, rng)[0]
        else:
            job.agent_msgs[i] += _lines(noise()[fw]["agent_fail_other"], t_a, 0.1, "cascade", ctx, rng)[0]
    for msgs in list(job.rank_msgs.values()) + list(job.node_msgs.values()) + list(job.agent_msgs.values()):
        msgs.sort(key=lambda m: m.t)


def _exit_code(agent: list[str]) -> int:
    for line in agent:
        m = re.search(r"(?:exitcode: |code )(-?\d+)", line)
        if m:
            return int(m.group(1))
    return 1
