"""The fourth outsider generator's corpus: which case gets which kind, shape and cluster; the failed job,
its succeeded history and the truth.json `l4 bench eval` reads."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.bench.othergen4.catalogue import kinds
from engine.bench.othergen4.shapes import FRAMEWORK, SHAPES, Clock, render
from engine.bench.othergen4.timeline import Job, Rank, build

TZ_MINUTES = (0, 480, -420, 60, 330, -300, 540)
MODELS = ("llama3-8b", "qwen2-7b", "ernie-4.5-21b", "gemma2-9b", "mixtral-8x7b", "baichuan2-13b")
DATASETS = ("fineweb-edu", "c4-en", "redpajama-v2", "wudao-200g", "the-stack-v2")


@dataclass(frozen=True)
class CasePlan:
    name: str
    kind: str
    shape: str
    nodes: int
    rpn: int
    seed: int


def split_of(name: str) -> str:
    """dev when the first byte of the case name's sha256 is even, else test."""
    return "dev" if hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "test"


def plan(cases: int, seed: int) -> list[CasePlan]:
    """Which kind and shape each case gets: every kind once before any twice (so 40 cases hold every
    kind), the shapes spread over the frameworks each kind has wording for."""
    rng = random.Random(f"othergen4:{seed}")
    names = list(kinds())
    out: list[CasePlan] = []
    order: list[str] = []
    shape_count = {s: 0 for s in SHAPES}
    for i in range(cases):
        if not order:
            order = names[:]
            rng.shuffle(order)
        kind = kinds()[order.pop()]
        fits = [s for s in SHAPES if FRAMEWORK[s] in kind.frameworks]
        low = min(shape_count[s] for s in fits)
        shape = rng.choice([s for s in fits if shape_count[s] == low])
        shape_count[shape] += 1
        nodes = rng.choice((4, 4, 6, 8, 8, 12, 16, 24, 32))
        if shape == "jax":
            rpn = 1
        else:
            rpn = rng.choice((2, 4, 8)) if nodes <= 8 else (2 if nodes <= 16 else 1)
        out.append(
            CasePlan(f"{kind.name}-{shape}-{i + 1:03d}", kind.name, shape, nodes, rpn, rng.getrandbits(32))
        )
    return out


def _hosts(shape: str, n: int, rng: random.Random, job_name: str) -> list[str]:
    base = rng.randint(1, 180)
    if shape == "paddle":
        return [f"bj-a800-{base + i:03d}" for i in range(n)]
    if shape == "jax":
        tag = f"{rng.getrandbits(24):06x}"
        return [f"a3mega-{tag}-{i:03d}" for i in range(n)]
    if shape == "kubeflow":
        return [f"{job_name}-master-0"] + [f"{job_name}-worker-{i}" for i in range(n - 1)]
    if shape == "volcano":
        return [f"{job_name}-worker-{i}" for i in range(n)]
    if shape == "pdsh":
        return [f"worker-{i}" for i in range(n)]
    return [f"lsf-gpu{base + i:03d}" for i in range(n)]


def _job(
    p: CasePlan, rng: random.Random, failed: bool, job_name: str, model: str, dsname: str
) -> tuple[Job, dict]:
    shape, fw = p.shape, FRAMEWORK[p.shape]
    hosts = _hosts(shape, p.nodes, rng, job_name)
    ranks = []
    for n in range(p.nodes):
        pid0 = rng.randint(2000, 60000)
        for lr in range(p.rpn):
            ranks.append(Rank(n * p.rpn + lr, n, lr, pid0 + 3 * lr + 1))
    world = len(ranks)
    ips = [f"10.{rng.randint(0, 31)}.{rng.randint(0, 255)}.{rng.randint(2, 250)}" for _ in hosts]
    total = rng.choice((1200, 1500, 2000, 2500, 3000))
    save_every = rng.choice((250, 500))
    # resumed from an earlier save, or from scratch; at least two saves left to make
    starts = [r for r in (0, save_every, 2 * save_every) if total - r > 2 * save_every]
    if failed and kinds()[p.kind].stage == "model_loading":
        starts = [save_every]  # a fault in loading the checkpoint: the job resumes (and stops there)
    rstep = rng.choice(starts)
    values = {
        "model": model,
        "dsname": dsname,
        "world": world,
        "nnodes": p.nodes,
        "rpn": p.rpn,
        "master": hosts[0],
        "mip": ips[0],
        "port": rng.choice((29500, 36000, 49173, 6170)),
        "ips": ips,
        "shards": rng.choice((512, 1024, 4096)),
        "total": total,
        "rstep": rstep,
        "rstep1": rstep + 1,
        "gbs": world * 4,
        "examples": total * world * 4,
        "nfs": f"nfs-{rng.randint(1, 9)}.storage.internal",
        "podid": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6)),
        "tids": [rng.randint(1000, 99999) for _ in ranks],
        "agent_pids": [rng.randint(100, 1999) for _ in hosts],
        "phys": [f"gpu-node-{rng.randint(1, 400):03d}" for _ in hosts],
        "jobid": rng.randint(100000, 999999),
        "cpu_secs": rng.uniform(1e5, 9e5),
        "max_mem": rng.randint(200000, 900000),
        "mp": min(8, p.rpn),
        "pp": 1,
        "shd": max(1, world // max(1, min(8, p.rpn))),
        "ndev": world * (8 if fw == "jax" else 1),
        "nldev": 8,
        "nd": p.nodes,
        "nf": 8,
        "pci": f"{rng.choice((0x18, 0x3B, 0x5D, 0x9A, 0xBB, 0xDB)):02x}:00.0",
        "ibn": rng.randint(0, 7),
        "peer_ip": ips[(1 + rng.randrange(max(1, p.nodes - 1))) % p.nodes],
        "pport": rng.randint(30000, 60000),
        "gidtail": f"{rng.getrandbits(16):04x}",
        "seq": rng.randint(20000, 90000),
        "numel": rng.choice((1048576, 8388608, 67108864)),
        "msx": f"{rng.randint(1, 999):03d}",
        "joined": max(1, world - p.rpn),
        "tried": f"{rng.uniform(1.2, 14.0):.2f}",
        "freemib": rng.randint(90, 900),
        "rsskb": rng.randint(400000000, 1500000000),
        "seqtok": rng.randint(33000, 65000),
        "maxtok": 32768,
        "lastloss": f"{rng.uniform(2.0, 3.5):.4f}",
        "lscale": "1.0",
        "slow": f"{rng.uniform(40, 300):.1f}",
        "med": f"{rng.uniform(1.0, 4.0):.2f}",
        "tidhex": f"{rng.getrandbits(40):010x}",
        "secs": rng.uniform(5, 90),
        "world_info": base64.b64encode(json.dumps({h: list(range(p.rpn)) for h in hosts}).encode()).decode(),
    }
    values["seqm"] = values["seq"] - 1
    values["shard"] = f"/mnt/datasets/{dsname}/train-{rng.randint(0, 4095):05d}-of-04096.parquet"
    values["numelw"] = values["numel"] * world
    job = Job(name=job_name, framework=fw, nodes=hosts, rpn=p.rpn, ranks=ranks, values=values)
    kind = kinds()[p.kind]
    fault_step = None
    if failed:
        job.kind = kind
        fault_node = rng.randrange(p.nodes)
        if kind.scope == "all":
            job.fault_ranks = [r.rank for r in ranks]
            job.fault_ranks.sort(key=lambda r: (r != (fault_node * p.rpn), r))
        else:
            job.fault_ranks = [fault_node * p.rpn + rng.randrange(p.rpn)]
        job.fault_node = fault_node
        saves = [s for s in range(rstep + save_every, total, save_every)]
        if kind.stage == "checkpointing":
            fault_step = rng.choice(saves[-3:])
        elif kind.name == "illegal_access_after_save":
            fault_step = rng.choice(saves[-3:]) + 1
        elif kind.stage == "training":
            lo, hi = rstep + (total - rstep) * 6 // 10, rstep + (total - rstep) * 9 // 10
            fault_step = rng.randint(lo, hi)
            if fault_step % save_every in (0, 1):
                fault_step += 3
        values["step"] = fault_step if fault_step is not None else total
        values["stepm"] = values["step"] - 1
        values["gnorm"] = f"{rng.uniform(1e4, 9e5):.1f}"
        job.fault_step = fault_step
    spstep = rng.uniform(1.2, 6.0)
    build(job, rng, spstep, rng.choice((10, 20, 50)), save_every, 2 * save_every, rstep, total)
    meta = {"fault_step": fault_step, "total": total, "rstep": rstep, "save_every": save_every}
    return job, meta


def _write_case(root: Path, p: CasePlan) -> Path:
    rng = random.Random(p.seed)
    kind = kinds()[p.kind]
    model, dsname = rng.choice(MODELS), rng.choice(DATASETS)
    case = root / p.name
    if case.exists():
        shutil.rmtree(case)
    epoch = datetime(2026, 11, 2, tzinfo=UTC) + timedelta(seconds=rng.randint(0, 28 * 86400))
    gz = rng.random() < 1 / 3
    crlf = p.shape == "lsf" and rng.random() < 0.5 or rng.random() < 0.08
    rotate = p.shape in ("kubeflow", "volcano") and rng.random() < 0.6
    odd = rng.random() < 0.25
    settings = {
        "model": model,
        "framework": {
            "paddle": "paddlenlp",
            "jax": "maxtext-like",
            "kubeflow": "torchtitan",
            "volcano": "torchtune",
            "pdsh": "deepspeed",
            "lsf": "torchrun",
        }[p.shape],
        "image": f"registry.local/train:{p.shape}-2026.11",
        "launcher": p.shape,
    }
    truth_bits: dict = {}
    skewed = None
    for h in range(3):
        failed = h == 0
        job_name = (
            f"{p.kind.replace('_', '-')[:18]}-{rng.randint(1000, 9999)}" if failed else f"{model}-run{h}"
        )
        job, meta = _job(p, rng, failed, job_name.lower(), model, dsname)
        tz = [rng.choice(TZ_MINUTES) for _ in job.nodes]
        if p.shape in ("kubeflow", "volcano", "jax"):
            tz = [0] * len(job.nodes)  # containers and TPU/GPU VMs log in UTC
        skew = [0.0] * len(job.nodes)
        if rng.random() < 0.6:
            k = rng.randrange(len(job.nodes))
            skew[k] = rng.choice((-1, 1)) * rng.uniform(90, 420)
            skewed = job.nodes[k] if failed else skewed
        # uptime at the job's start: the kernel's boot lines (timeline) stand 2-6 hours before it
        boot = [3600.0 * (2 + k % 5) + rng.uniform(20.0, 60.0) for k in range(len(job.nodes))]
        clock = Clock(epoch + timedelta(days=-h), tz, skew, boot)
        folder = case / ("failed" if failed else f"history/h{h}")
        w = render(job, clock, rng, p.shape)
        w.write(folder, gz and failed, crlf, rotate and failed, odd and failed)
        (folder / "job.json").write_text(
            json.dumps(
                {
                    "job_id": job.name,
                    "status": "failed" if failed else "succeeded",
                    "settings": settings,
                    "launcher": p.shape,
                },
                indent=1,
            )
            + "\n"
        )
        if failed:
            truth_bits = {"w": w, "job": job, "meta": meta, "tz": tz}
    w, job, meta = truth_bits["w"], truth_bits["job"], truth_bits["meta"]
    roles = {k: list(dict.fromkeys(v)) for k, v in w.roles.items()}
    indicating = roles.get("node", []) + roles.get("root", [])
    root_lines = list(dict.fromkeys(indicating + roles.get("frames", [])))
    truth = {
        "case_id": p.name,
        "kind": p.kind,
        "category": kind.category,
        "source": f"othergen4/{p.kind}",
        "split": split_of(p.name),
        "stage": kind.stage,
        "iteration": meta["fault_step"] if kind.stage in ("training", "checkpointing") else None,
        "faulty_nodes": [] if kind.scope == "all" else [job.nodes[job.fault_node]],
        "indicating": [{"key": p.kind, "lines": list(dict.fromkeys(indicating))}],
        "root_lines": root_lines,
        "context_lines": list(dict.fromkeys(roles.get("frames", []) + roles.get("precursor", []))),
        "cascade_lines": list(dict.fromkeys(roles.get("cascade", []) + roles.get("agent", []))),
        "shape": p.shape,
        "framework": FRAMEWORK[p.shape],
        "scope": kind.scope,
        "nodes": p.nodes,
        "ranks_per_node": p.rpn,
        "world_size": p.nodes * p.rpn,
        "gzip": gz,
        "crlf": crlf,
        "rotated": rotate,
        "odd_bytes": odd,
        "skewed_node": skewed,
        "utc_offsets_min": sorted(set(truth_bits["tz"])),
        "resumed_from": meta["rstep"] or None,
        "total_steps": meta["total"],
    }
    (case / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return case


def generate_corpus(out: Path, cases: int, seed: int) -> list[Path]:
    """Write `cases` labelled cases into `out` (plus cases.json); the same seed gives the same bytes."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plans = plan(cases, seed)
    dirs = [_write_case(out, p) for p in plans]
    index = [
        {
            "case_id": p.name,
            "path": p.name,
            "kind": p.kind,
            "shape": p.shape,
            "category": kinds()[p.kind].category,
            "split": split_of(p.name),
            "source": f"othergen4/{p.kind}",
        }
        for p in plans
    ]
    (out / "cases.json").write_text(json.dumps(index, indent=1) + "\n")
    return dirs
