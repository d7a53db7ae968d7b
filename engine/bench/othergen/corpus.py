"""`l4 bench othergen OUT --cases N --seed S`: a corpus of failed jobs (with 2–3 succeeded history jobs of
the same family each) written by the outsider generator, labelled from what it generated.

Layout (what `engine.bench.evaluate` reads): OUT/cases.json, OUT/<case>/failed/, OUT/<case>/history/<job>/,
OUT/<case>/truth.json with kind, category, stage, iteration, faulty_nodes, indicating (key + lines),
root_lines, cascade_lines, context_lines, source "othergen/<kind>" and split (dev when the first byte of
sha256(case name) is even, else test). Everything is drawn from `seed`: the same seed gives the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.bench.othergen.faults import inject
from engine.bench.othergen.job import Job, Record
from engine.bench.othergen.templates import load, randoms, render
from engine.bench.othergen.timeline import Plan, noise, run

MODELS = ("llama-7b", "gpt3-13b", "llama2-70b", "bloom-176b", "qwen2-72b", "mixtral-8x7b")
ZONES = (0, 0, 8, 2, -5)


def kinds() -> dict[str, dict]:
    """The fault catalogue (faults.yaml)."""
    return load("faults")["kinds"]


def split_of(name: str) -> str:
    return "dev" if hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "test"


def families_for(kind: dict) -> list[str]:
    fams = load("families")["families"]
    allowed = kind.get("families") or list(fams)
    return [f for f in allowed if set(fams[f]["tags"]) & set(kind["tags"])]


def case_kinds(cases: int, seed: int) -> list[str]:
    """The fault kind of each case: the catalogue in a seeded order, round and round (every kind once in
    each run of as many cases as there are kinds)."""
    order = sorted(kinds())
    random.Random(f"othergen:{seed}:order").shuffle(order)
    return [order[i % len(order)] for i in range(cases)]


def generate_corpus(out: Path, cases: int, seed: int) -> list[Path]:
    """Write `cases` cases into `out` (replacing cases of the same names); returns their folders."""
    if cases < 1:
        raise ValueError("--cases must be at least 1")
    out.mkdir(parents=True, exist_ok=True)
    catalogue = kinds()
    index, dirs = [], []
    for i, kind_name in enumerate(case_kinds(cases, seed)):
        name = f"og{seed}-{i:03d}"
        case = out / name
        if case.exists():
            shutil.rmtree(case)
        truth = make_case(case, kind_name, catalogue[kind_name], random.Random(f"othergen:{seed}:{i}"))
        truth["split"] = split_of(name)
        (case / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        index.append({"case_dir": name, "kind": kind_name, "stage": truth["stage"], "split": truth["split"]})
        dirs.append(case)
    (out / "cases.json").write_text(json.dumps({"generator": "othergen", "seed": seed, "cases": index},
                                               indent=1) + "\n")
    return dirs


def make_case(case: Path, kind_name: str, kind: dict, rng: random.Random) -> dict:
    """One failed job and its history jobs; the truth of the failed job."""
    family = rng.choice(families_for(kind))
    fam = load("families")["families"][family]
    nodes = rng.randint(4, 16)
    per_node = 8 if "ascend" in fam["tags"] else rng.choice([4, 6, 8])
    site = rng.choice(fam["sites"])
    py_dir = site.split("/lib/")[0] + "/bin"
    py_bin = py_dir + "/python" if "conda" in site or "python3.10.5" in site else "/usr/bin/python"
    model = rng.choice(MODELS)
    shared = {
        "model": model, "tp": rng.choice([1, 2, 4, 8]), "pp": rng.choice([1, 2, 4]), "gbs": 1024,
        "seed": rng.choice([42, 1234, 2023]), "script": fam["script"], "site": site, "py_bin": py_bin,
        "py_dir": py_dir, "workdir": fam["workdir"],
        "ckpt": f"/mnt/ckpt/{model}", "data": f"/mnt/data/{model.split('-')[0]}_text_document",
        "master_port": rng.choice([29500, 23456, 6000]), "uid": rng.randint(1000, 60000),
    }
    pattern = rng.choice(fam["hosts"])
    pool = []
    for n in range(nodes + 8):
        host = render(pattern, {**randoms(rng), "n": n + 1})
        if host not in pool:
            pool.append(host)
    zone = rng.choice(ZONES)
    day0 = datetime(2025, 1, 6, tzinfo=UTC) + timedelta(days=rng.randint(0, 600),
                                                                  seconds=rng.randint(0, 86399))
    settings = {**fam["settings"], "model": model, "nodes": nodes}

    history = []
    for h in range(rng.randint(2, 3)):
        job_id = f"job-{rng.randint(10000, 99999)}"
        hosts = rng.sample(pool, nodes)
        job = _job(rng, family, nodes, per_node, day0 + timedelta(days=h - 3), zone, shared, hosts, job_id)
        plan = _plan(rng, resume=rng.random() < 0.5, stop=None)
        t_end = run(job, plan, rng)
        noise(job, t_end, rng)
        job.write(case / "history" / job_id, gz=rng.random() < 0.35,
                  manifest={"job_id": job_id, "status": "succeeded", "settings": settings}, truncate=set())
        history.append(job_id)

    job_id = f"job-{rng.randint(10000, 99999)}"
    hosts = rng.sample(pool, nodes)
    skewed = rng.randrange(nodes) if rng.random() < 0.4 else None
    job = _job(rng, family, nodes, per_node, day0, zone, shared, hosts, job_id, skewed=skewed,
               skew_s=rng.choice([-1, 1]) * rng.uniform(120, 600))
    plan = _plan(rng, resume=bool(kind.get("resume")) or rng.random() < 0.4, stop=kind["stage"], kind=kind)
    t_fault = run(job, plan, rng)
    faulty = _faulty(job, kind, rng)
    noise(job, t_fault, rng)
    inject(job, kind, faulty, t_fault, rng)
    truncate = {job.file_of(faulty, "stdout")} if kind.get("truncate_faulty") else set()
    for r in rng.sample(job.ranks, max(1, len(job.ranks) // 12)):
        truncate.add(job.file_of(r, rng.choice(["stdout", "stderr"])))
    job.write(case / "failed", gz=rng.random() < 0.35,
              manifest={"job_id": job_id, "status": "failed", "settings": settings}, truncate=truncate)
    return _truth(job, kind_name, kind, faulty, plan, family)


def _job(rng: random.Random, family: str, nodes: int, per_node: int, start: datetime, zone: int,
         shared: dict, hosts: list[str], job_id: str, skewed: int | None = None, skew_s: float = 0.0) -> Job:
    ctx = {**shared, "jobid": job_id.split("-")[1], "run_id": f"{rng.getrandbits(64)}",
           "commid": f"{rng.getrandbits(64):x}", "plog_prefix": start.strftime("%Y%m%d%H%M%S"),
           "start_it": 0}
    return Job(rng, family, nodes, per_node, start, zone, ctx, hosts, skewed, skew_s)


def _plan(rng: random.Random, *, resume: bool, stop: str | None, kind: dict | None = None) -> Plan:
    kind = kind or {}
    log_interval = 1 if kind.get("iteration") else rng.choice([1, 1, 5, 10])
    save_interval = log_interval * rng.choice([10, 20, 25])
    start_it = save_interval * rng.randint(2, 40) if resume else 0
    logged = rng.randint(20, 120)
    end_it = start_it + logged * log_interval
    if stop == "checkpointing":
        end_it = (end_it // save_interval + 1) * save_interval
    elif stop in ("training", None) and not kind.get("after_training"):
        end_it += rng.randint(1, log_interval)
        if stop == "training" and end_it % save_interval == 0:
            end_it += 1
    if stop == "teardown":
        stop_stage: str | None = "teardown"
    else:
        stop_stage = stop
    iters = max(end_it + 1000, rng.choice([95367, 115311, 250000, 8000, 1856]))
    return Plan(resume=resume, start_it=start_it, iters=iters, end_it=end_it,
                period=rng.uniform(0.8, 30.0), log_interval=log_interval, save_interval=save_interval,
                stop=stop_stage, before_workers=bool(kind.get("before_workers")),
                spike_from=end_it - 3 if kind.get("loss_spike") else None)


def _faulty(job: Job, kind: dict, rng: random.Random):
    if kind["stage"] in ("model_loading", "data_loading", "checkpointing") or kind.get("all_nodes"):
        return rng.choice([job.ranks[0], rng.choice(job.ranks)])
    return rng.choice(job.ranks)


def _truth(job: Job, kind_name: str, kind: dict, faulty, plan: Plan, family: str) -> dict:
    recs = job.labelled()
    root = _texts(recs["root"])
    context = [x for x in _texts(recs["context"]) if x not in root]
    cascade = [x for x in _texts(recs["cascade"]) if x not in root]
    groups: dict[str, list[str]] = {}
    for rec in recs["root"]:
        lines = groups.setdefault(rec.key or kind_name, [])
        if rec.text not in lines:
            lines.append(rec.text)
    return {
        "kind": kind_name,
        "category": kind["category"],
        "stage": kind["stage"],
        "iteration": plan.end_it if kind.get("iteration") else None,
        "faulty_nodes": [job.nodes[faulty.node].host] if kind.get("node_fault") else [],
        "faulty_rank": faulty.rank,
        "indicating": [{"key": k, "lines": v} for k, v in groups.items()],
        "root_lines": root,
        "cascade_lines": cascade,
        "context_lines": context,
        "source": f"othergen/{kind_name}",
        "family": family,
        "sources": kind.get("sources", []),
        "clock_skewed_node": next((n.host for n in job.nodes if n.skew), None),
    }


def _texts(recs: list[Record]) -> list[str]:
    seen: dict[str, None] = {}
    for rec in sorted(recs, key=lambda r: (r.t, r.order)):
        seen.setdefault(rec.text, None)
    return list(seen)
