"""Writing one fault kind of faults.yaml into a generated job: its root lines on the faulty rank or node,
the traceback context around them, the consequences on the other ranks and the launcher's reaction."""

from __future__ import annotations

import random

from engine.bench.othergen.job import Job, Rank
from engine.bench.othergen.templates import load, render

EXT_MODULES = ("transformer_engine/pytorch/module/base.py", "apex/transformer/tensor_parallel/layers.py",
               "flash_attn/flash_attn_interface.py", "deepspeed/ops/adam/fused_adam.py")
AGENT_WRITERS = ("agent", "agents_others", "first_agent", "scheduler", "node0")


def fault_context(job: Job, faulty: Rank, rng: random.Random, kind: dict) -> dict:
    """Values the fault's lines share across ranks (the collective that timed out, the bad peer, ...)."""
    seq = rng.randint(800, 90000)
    peer = rng.choice([r for r in job.ranks if r.node != faulty.node])
    return {
        "seq": seq, "seq_next": seq + rng.randint(1, 3), "seq_prev": seq - 1,
        "optype": rng.choice(["ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "BROADCAST"]),
        "numel": rng.randint(1, 600_000_000), "bad_ip": job.nodes[faulty.node].ip,
        "peer_ip": job.nodes[peer.node].ip, "peer_rank": peer.rank,
        "worker_pid": rng.randint(10000, 4000000), "ext_mod": rng.choice(EXT_MODULES),
        "exitcode": kind.get("exitcode", 1),
    }


def inject(job: Job, kind: dict, faulty: Rank, t_fault: float, rng: random.Random) -> float:
    """Write `kind`'s blocks from `t_fault` on; returns the moment the last rank stopped."""
    extra = fault_context(job, faulty, rng, kind)
    others_far = [r for r in job.ranks if r.node != faulty.node]
    chosen = {
        "peers": rng.sample(others_far, min(len(others_far), rng.randint(2, 4))),
        "stage_ranks": [faulty] + rng.sample([r for r in job.ranks if r is not faulty], rng.randint(1, 3)),
    }
    variant = rng.randint(0, 1)
    t = t_fault
    end = t_fault
    for block in kind["blocks"]:
        if "variant" in block and block["variant"] != variant:
            continue
        if "at" in block:
            t = t_fault + block["at"]
        who, role, key = block["who"], block["role"], block.get("key")
        ranks = job.select("faulty" if who == "kernel" else who, faulty, chosen.get(who))
        if who == "kernel":
            t = job.kernel(faulty, t, block["lines"], role=role, key=key)
        else:
            t = _lines(job, ranks, block, t, role, key, extra, rng)
        end = max(end, t)
    if kind.get("launcher"):
        end = launcher(job, faulty, end + rng.uniform(0.5, 5), extra, kind, rng)
    return end


def _lines(job: Job, ranks: list[Rank], block: dict, t: float, role: str, key: str | None, extra: dict,
           rng: random.Random) -> float:
    fails = load("families")["launcher_failures"][job.fam["launcher_failure"]]
    slurm = load("families")["slurm"]
    end = t
    for r in ranks:
        tt = t + rng.uniform(0, 0.8 if len(ranks) > 1 else 0)
        for line in block["lines"]:
            if line == "{slurm_aborted}":
                templates = [slurm["aborted"]]
            elif line == "{sigterm_all}":
                victims = job.nodes[r.node].ranks
                templates = [fails["sigterm"].replace("{victim_pid}", str(v.pid)) for v in victims]
            else:
                templates = [line]
            for tpl in templates:
                ctx = job.rank_ctx(r, tt, extra)
                text = job.wrap(r, block["stream"], render(tpl, ctx), block["who"] not in AGENT_WRITERS)
                job.add(r, block["stream"], tt, text, role=role, key=key)
                tt += rng.uniform(0.0001, 0.01)
        end = max(end, tt)
    return end


def launcher(job: Job, faulty: Rank, t: float, extra: dict, kind: dict, rng: random.Random) -> float:
    """The launcher's consequences (cascade): SIGTERM to the faulty node's other workers, the failure line
    and torchrun's ChildFailedError report on the faulty node, SIGTERM on the other nodes, srun's lines."""
    fams = load("families")
    fails = fams["launcher_failures"][job.fam["launcher_failure"]]
    node = job.nodes[faulty.node]
    agent = node.ranks[0]
    ctx_extra = {**extra, "exit_traceback": render(kind.get("exit_traceback", "<N/A>"),
                                                   job.rank_ctx(faulty, t, extra))}
    for victim in node.ranks:
        if victim is not faulty:
            ctx = job.rank_ctx(faulty, t, {**ctx_extra, "victim_pid": victim.pid})
            job.add(agent, "stderr", t, render(fails["sigterm"], ctx), role="cascade")
            t += rng.uniform(0.0005, 0.01)
    t += rng.uniform(0.3, 2)
    ctx = job.rank_ctx(faulty, t, ctx_extra)
    job.add(agent, "stderr", t, render(fails["failed"], ctx), role="cascade")
    if fails["summary"]:
        for line in fams["child_failed"]:
            t += 0.0003
            job.add(agent, "stderr", t, render(line, job.rank_ctx(faulty, t, ctx_extra)), role="cascade")
    end = t
    for other in job.nodes:
        if other is node:
            continue
        tt = t + rng.uniform(1, 30)
        for victim in other.ranks:
            ctx = job.rank_ctx(other.ranks[0], tt, {**ctx_extra, "victim_pid": victim.pid})
            job.add(other.ranks[0], "stderr", tt, render(fails["sigterm"], ctx), role="cascade")
            tt += rng.uniform(0.0005, 0.01)
        end = max(end, tt)
    if job.fam.get("scheduler") == "slurm":
        first = job.nodes[0].ranks[0]
        end += rng.uniform(1, 5)
        ctx = job.rank_ctx(faulty, end, {**ctx_extra, "exitcode": max(1, int(ctx_extra["exitcode"]))})
        job.add(first, "stderr", end, render(fams["slurm"]["task_exit"], ctx), role="cascade")
        job.add(first, "stderr", end + 0.01, render(fams["slurm"]["aborted"], ctx), role="cascade")
    return end
