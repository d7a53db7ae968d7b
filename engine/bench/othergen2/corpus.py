"""A corpus of labelled cases (`l4 bench othergen2 OUT --cases N --seed S`), as `l4 bench eval` reads it:

OUT/cases.json, OUT/<case>/truth.json, OUT/<case>/failed/ and OUT/<case>/history/<job>/ (2-3 succeeded
jobs of the same family). The kinds go round the catalogue so that every kind (and so every stage) is in
any 17 consecutive cases; everything else is drawn from a generator seeded by (seed, case name).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

from engine.bench.othergen2 import shapes
from engine.bench.othergen2.catalogue import FAULTS, WORDING
from engine.bench.othergen2.job import Job, Spec

NODE_COUNTS = (4, 4, 6, 8, 8, 12, 16, 24, 32)
PER_NODE = (2, 4, 8)
MAX_RANKS = 128
MODELS = ("llama3-8b", "llama2-70b", "gpt3-175b-proxy", "mixtral-8x7b", "qwen2-72b", "nemotron-15b")
BARE_HOSTS = {
    "nvidia": ("dgx{n:03d}", "hgx-h100-{n:02d}", "sh-a100-{n:03d}"),
    "ascend": ("atlas800-{n:02d}", "ascend-a2-{n:03d}"),
}
SLURM_HOSTS = ("gpu-a{n:03d}", "nid{n:06d}", "hpc-{n:04d}")


def split_of(name: str) -> str:
    """dev when the first byte of sha256 of the case name is even, else test."""
    return "dev" if hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "test"


def plan(cases: int, seed: int) -> list[dict]:
    """The catalogue entry of each case: rounds of the whole catalogue, each round in a seeded order."""
    order_rng = random.Random(f"othergen2:{seed}:order")
    faults: list[dict] = []
    while len(faults) < cases:
        block = list(FAULTS)
        order_rng.shuffle(block)
        faults += block
    return faults[:cases]


def generate_corpus(out: Path, cases: int, seed: int) -> list[Path]:
    """Write `cases` cases into `out` (its earlier cases of the same names are replaced)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kinds = plan(cases, seed)
    dirs, index = [], []
    for i in range(cases):
        name = f"og2-s{seed}-{i:03d}"
        case = out / name
        if case.exists():
            shutil.rmtree(case)
        truth = _write_case(case, name, kinds[i], random.Random(f"othergen2:{seed}:{name}"))
        dirs.append(case)
        index.append(
            {"case_dir": name, "kind": truth["kind"], "stage": truth["stage"], "split": truth["split"]}
        )
    (out / "cases.json").write_text(
        json.dumps({"generator": "othergen2", "seed": seed, "cases": index}, indent=1)
    )
    return dirs


def _family(rng: random.Random, fault: dict) -> dict:
    accel = fault["accel"]
    names = [n for n, fw in WORDING["frameworks"].items() if accel == "any" or fw["accel"] == accel]
    framework = rng.choice(sorted(names))
    shape = rng.choice(fault.get("shapes") or list(shapes.SHAPES))
    nodes = rng.choice(NODE_COUNTS)
    per_node = rng.choice(PER_NODE)
    while nodes * per_node > MAX_RANKS:
        per_node //= 2
    save = rng.choice((250, 500, 1000))
    fw_accel = WORDING["frameworks"][framework]["accel"]
    return {
        "framework": framework,
        "shape": shape,
        "nodes": nodes,
        "per_node": per_node,
        "accel": fw_accel,
        "model": rng.choice(MODELS),
        "image": f"nvcr.io/nvidia/pytorch:{rng.choice(['24.05', '24.07', '24.10'])}-py3"
        if fw_accel == "nvidia"
        else "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindspeed:8.0.RC3",
        "log_interval": rng.choice((5, 10, 10, 20)),
        "eval_interval": rng.choice((500, 1000, 2000)),
        "save_interval": save,
        "base_ms": rng.uniform(900, 9000),
        "gbs": rng.choice((256, 512, 1024, 2048)),
        "offset_min": {"k8s": 0, "slurm": rng.choice((60, 120, -300)), "bare": rng.choice((480, 0, -420))}[
            shape
        ],
        "host_pattern": rng.choice(SLURM_HOSTS if shape == "slurm" else BARE_HOSTS[fw_accel]),
        "pool": rng.randint(40, 400),
    }


def _hosts(rng: random.Random, fam: dict, jobname: str) -> list[str]:
    n = fam["nodes"]
    if fam["shape"] == "k8s":
        return [f"{jobname}-master-0"] + [f"{jobname}-worker-{i}" for i in range(n - 1)]
    picked = sorted(rng.sample(range(fam["pool"], fam["pool"] + 3 * n + 8), n))
    return [fam["host_pattern"].format(n=p) for p in picked]


def _spec(rng: random.Random, fam: dict, fault: dict | None, start: float) -> Spec:
    suffix = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
    jobname = f"{fam['model'].split('-')[0]}-pt-{suffix}"
    save = fam["save_interval"]
    total = rng.randint(2000, 6000) // fam["log_interval"] * fam["log_interval"]
    resume = save * rng.randint(1, max(1, int(total * 0.3) // save))
    return Spec(
        name=jobname,
        shape=fam["shape"],
        framework=fam["framework"],
        hosts=_hosts(rng, fam, jobname),
        per_node=fam["per_node"],
        jobid=str(rng.randint(400_000, 9_999_999)),
        start=start,
        offset_min=fam["offset_min"],
        total=total,
        resume=resume,
        log_interval=fam["log_interval"],
        eval_interval=fam["eval_interval"],
        save_interval=save,
        base_ms=fam["base_ms"] * rng.uniform(0.97, 1.03),
        gbs=fam["gbs"],
        fault=fault,
        gz=rng.random() < 0.3,
    )


def _place(rng: random.Random, spec: Spec, fault: dict) -> dict:
    """The fault of this job: which rank it strikes and at which iteration."""
    f = dict(fault)
    f["_victim"] = rng.randrange(len(spec.hosts) * spec.per_node)
    span = spec.total - spec.resume
    if f["when"] == "iteration":
        f["_iteration"] = rng.randint(spec.resume + int(0.6 * span), spec.total - 3)
    elif f["when"] == "checkpoint":
        saves = [
            i
            for i in range(spec.resume + spec.save_interval, spec.total + 1, spec.save_interval)
            if i >= spec.resume + span // 2
        ] or [spec.total // spec.save_interval * spec.save_interval]
        f["_iteration"] = rng.choice(saves)
    return f


def _write_case(case: Path, name: str, fault: dict, rng: random.Random) -> dict:
    fam = _family(rng, fault)
    start = 1_780_000_000 + rng.randint(0, 20_000_000)
    settings = {
        "model": fam["model"],
        "framework": fam["framework"],
        "image": fam["image"],
        "launcher": {"k8s": "kubeflow-pytorchjob", "slurm": "srun", "bare": "torchrun"}[fam["shape"]],
    }
    for h in range(rng.randint(2, 3)):
        spec = _spec(rng, fam, None, start - (h + 1) * rng.uniform(3, 9) * 86400)
        job = Job(spec, rng)
        job.build()
        folder = case / "history" / f"{spec.name}"
        job.write(folder)
        _manifest(folder, spec, "succeeded", settings)
    spec = _spec(rng, fam, None, start)
    spec.fault = _place(rng, spec, fault)
    if rng.random() < 0.6:
        spec.skew_node = rng.randrange(len(spec.hosts))
        spec.skew_s = rng.choice((-1, 1)) * rng.uniform(90, 420)
    job = Job(spec, rng)
    job.build()
    job.write(case / "failed", partial_tail=rng.random() < 0.5)
    _manifest(case / "failed", spec, "failed", settings)
    lab = job.labels
    truth = {
        "kind": fault["kind"],
        "category": fault["category"],
        "stage": fault["stage"],
        "iteration": lab.iteration,
        "faulty_nodes": lab.faulty_nodes,
        "indicating": [{"key": k, "lines": _unique(v)} for k, v in lab.indicating.items()],
        "root_lines": _unique(lab.root),
        "cascade_lines": _unique(lab.cascade),
        "context_lines": _unique(lab.context),
        "source": f"othergen2/{fault['kind']}",
        "split": split_of(name),
        "shape": fam["shape"],
        "framework": fam["framework"],
        "nodes": fam["nodes"],
        "ranks_per_node": fam["per_node"],
        "gzip": spec.gz,
        "clock_skew_s": round(spec.skew_s, 1),
        "skewed_node": spec.hosts[spec.skew_node] if spec.skew_node is not None else None,
        "wording_from": fault["source"],
    }
    (case / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False))
    return truth


def _manifest(folder: Path, spec: Spec, status: str, settings: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.json").write_text(
        json.dumps({"job_id": f"{spec.name}-{spec.jobid}", "status": status, "settings": settings}, indent=1)
    )


def _unique(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))
