"""`generate_corpus`: the cases folder (`cases.json`, `<case>/failed/`, `<case>/history/<job>/`,
`<case>/truth.json`) that `l4 bench eval` reads; the same seed gives the same bytes."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import shutil
from pathlib import Path

from engine.bench.othergen3.catalogue import Kind, kinds, wording
from engine.bench.othergen3.job import DATA_END, INIT_END, Builder, Fault, Spec
from engine.bench.othergen3.shapes import Files, render

MODELS = ("llama-7b", "llama2-13b", "mixtral-8x7b", "qwen2-72b", "gpt-neox-20b", "falcon-40b")
EPOCH_2026 = 1767225600
MAX_RANKS = 64


def split_of(name: str) -> str:
    return "dev" if hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "test"


def _hosts(shape: str, n: int, rng: random.Random) -> tuple[list[str], list[str]]:
    a, b = rng.randint(0, 15), rng.randint(0, 200)
    ips = [f"10.{a}.{b + i // 200}.{10 + i % 200}" for i in range(n)]
    tag, base = f"{rng.getrandbits(24):06x}", rng.randint(0, 300)
    names = {
        "ray": [f"ip-{ip.replace('.', '-')}" for ip in ips],
        "mpi": [f"hpc-a100-{base + i:03d}" for i in range(n)],
        "sagemaker": [f"algo-{i + 1}" for i in range(n)],
        "azureml": [f"node-{i}-{tag}" for i in range(n)],
        "msrun": [f"ascend-910b-{b + i:03d}" for i in range(n)],
    }[shape]
    return names, ips


def make_spec(shape: str, kind: Kind, rng: random.Random) -> Spec:
    n = rng.choice((4, 4, 6, 8, 8, 12, 16, 24, 32))
    per = rng.choice((1, 2, 4, 8))
    while n * per > MAX_RANKS:
        per //= 2
    hosts, ips = _hosts(shape, n, rng)
    resume = rng.choice((0, 1000, 2000, 4000, 8000))
    if kind.stage == "model_loading":
        resume = max(resume, 1000)
    return Spec(
        shape=shape,
        hosts=hosts,
        ips=ips,
        per_node=per,
        start=EPOCH_2026 + rng.randint(0, 300 * 86400),
        resume=resume,
        steps=rng.randint(1500, 4000),
        log_every=rng.choice((10, 20, 25, 50)),
        step_secs=rng.uniform(0.8, 3.0),
        seed=rng.getrandbits(32),
        model=rng.choice(MODELS),
    )


def make_fault(kind: Kind, b: Builder, rng: random.Random) -> Fault:
    spec = b.spec
    n = len(spec.hosts)
    launcher_root = any(g.where == "launcher" and g.label == "root" for g in kind.groups)
    hardware = kind.category.startswith(("hardware/", "resource/", "infrastructure/"))
    node = rng.randrange(1, n) if launcher_root or hardware else rng.randrange(n)
    local = rng.randrange(spec.per_node)
    steps = b.step_times
    if kind.at == "init":
        return Fault(kind, node, local, 12.0 + rng.uniform(0, 1.5), None)
    if kind.at == "data_loading":
        return Fault(kind, node, local, INIT_END + rng.uniform(15, 40), None)
    if kind.at == "model_loading":
        return Fault(kind, node, local, DATA_END + rng.uniform(5, 30), None)
    if kind.at == "teardown":
        return Fault(kind, node, local, b.end - 20 + rng.uniform(1, 3), None)
    if kind.at == "save":
        saves = [(s, t) for s, t in steps if s % b.save_every == 0]
        step, t = min(saves, key=lambda st: abs(st[0] - (spec.resume + 0.8 * spec.steps)))
        return Fault(kind, node, local, t + rng.uniform(5, 20), step)
    k = len(steps)
    idx = min(k - 2, max(1, int(float(kind.at) * k) + rng.randint(-k // 10, k // 20)))
    step, t = steps[idx]
    return Fault(kind, node, local, t + rng.uniform(0.05, 0.5) * spec.step_secs, step)


def _write(
    job: Path,
    files: Files,
    nodes: dict | None,
    meta: dict,
    rng: random.Random,
    *,
    partial: list[str],
    gz: bool,
    crlf: bool,
    rotate: bool,
) -> dict[str, list[str]]:
    """Write one job folder; return path -> its rendered lines (as written, before compression)."""
    job.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[str]] = {}
    eol = "\r\n" if crlf else "\n"
    for rel, entries in sorted(files.items()):
        texts = [e.text for e in entries]
        cut = rel in partial and texts and entries[-1].line is not None and not entries[-1].line.label
        parts = [(rel, texts)]
        if rotate and rel.endswith((".out", ".log", ".txt")) and len(texts) > 400:
            k = int(len(texts) * 0.6)
            if not any(e.line is not None and e.line.label for e in entries[:k]):
                parts = [(rel + ".1", texts[:k]), (rel, texts[k:])]
        for name, lines in parts:
            body = eol.join(lines)
            if lines and not (cut and name == rel):
                body += eol
            elif lines:  # the writer died mid-line: the last line is cut and has no line end
                body = body[: len(body) - len(lines[-1]) // 2]
            data = body.encode("utf-8", "surrogateescape")
            path = job / (name + ".gz" if gz else name)
            path.parent.mkdir(parents=True, exist_ok=True)
            if gz:
                with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as z:
                    z.write(data)
            else:
                path.write_bytes(data)
            written[name] = lines
    if nodes is not None:
        meta = dict(meta, nodes={h: sorted(f + ".gz" if gz else f for f in fs) for h, fs in nodes.items()})
    (job / "job.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    return written


def _truth(files: Files) -> dict:
    groups: dict[str, list[str]] = {}
    labelled: dict[str, list[str]] = {"root": [], "context": [], "cascade": []}
    for entries in files.values():
        for e in entries:
            ln = e.line
            if ln is None or not ln.label:
                continue
            if ln.label in ("root", "indicating"):
                bucket = groups.setdefault(ln.key or ln.label, [])
                if e.text not in bucket:
                    bucket.append(e.text)
            if ln.label in labelled and e.text not in labelled[ln.label]:
                labelled[ln.label].append(e.text)
    return {
        "indicating": [{"key": k, "lines": v} for k, v in sorted(groups.items())],
        "root_lines": labelled["root"],
        "context_lines": labelled["context"],
        "cascade_lines": labelled["cascade"],
    }


def _partial(files: Files, rng: random.Random, fault: Fault | None, spec: Spec) -> list[str]:
    """Files whose last line is cut: the lost node's files, and now and then one other rank file."""
    out = []
    if fault and fault.kind.stop == "faulty_node":
        host = spec.hosts[fault.node] + "/"
        out += [p for p in files if p.startswith(host) and files[p]]
    if rng.random() < 0.5:
        ends = [
            p for p, es in sorted(files.items()) if es and es[-1].line is not None and not es[-1].line.label
        ]
        if ends:
            out.append(rng.choice(ends))
    return out


def _job(
    dest: Path,
    spec: Spec,
    b: Builder,
    job_id: str,
    rng: random.Random,
    *,
    fault: Fault | None,
    gz: bool,
    crlf: bool,
    rotate: bool,
) -> Files:
    """Render and write one job (failed when `fault` is given, else succeeded); return its files."""
    files, nodes = render(spec, b.build())
    meta = {"job_id": job_id, "status": "failed" if fault else "succeeded", "settings": spec.settings()}
    _write(
        dest,
        files,
        nodes,
        meta,
        rng,
        partial=_partial(files, rng, fault, spec),
        gz=gz,
        crlf=crlf,
        rotate=rotate,
    )
    return files


def generate_case(out: Path, name: str, kind: Kind, rng: random.Random) -> Path:
    shape = rng.choice(kind.shapes)
    spec = make_spec(shape, kind, rng)
    n = len(spec.hosts)
    skewed = rng.randrange(n) if rng.random() < 0.7 else None
    if skewed is not None:
        spec.skew = {skewed: rng.choice((-1, 1)) * rng.uniform(90, 420)}
    gz, crlf, rotate = (
        rng.random() < 0.3,
        shape in ("sagemaker", "azureml") and rng.random() < 0.5,
        rng.random() < 0.4,
    )
    case = out / name
    if case.exists():
        shutil.rmtree(case)
    b = Builder(spec, rng)
    fault = make_fault(kind, b, rng)
    b.strike(fault)
    files = _job(
        case / "failed", spec, b, f"{name}-failed", rng, fault=fault, gz=gz, crlf=crlf, rotate=rotate
    )
    for h in range(rng.randint(2, 3)):
        hspec = Spec(
            **{
                **spec.__dict__,
                "start": spec.start - (h + 1) * rng.randint(2, 9) * 86400,
                "steps": rng.randint(1500, 4000),
                "seed": rng.getrandbits(32),
                "skew": {},
            }
        )
        if rng.random() < 0.3:
            hspec.skew = {rng.randrange(n): rng.uniform(-300, 300)}
        _job(
            case / "history" / f"ok{h}",
            hspec,
            Builder(hspec, rng),
            f"{name}-ok{h}",
            rng,
            fault=None,
            gz=gz,
            crlf=crlf,
            rotate=rotate,
        )
    truth = {
        "kind": kind.name,
        "category": kind.category,
        "stage": kind.stage,
        "iteration": fault.step if kind.stage in ("training", "checkpointing") else None,
        "faulty_nodes": _faulty_nodes(kind, spec, fault),
        **_truth(files),
        "source": f"othergen3/{kind.name}",
        "split": split_of(name),
        "shape": shape,
        "framework": spec.framework,
        "nodes": n,
        "ranks_per_node": spec.per_node,
        "gzip": gz,
        "crlf": crlf,
        "rotated": rotate,
        "skewed_node": spec.hosts[skewed] if skewed is not None else None,
        "fault_node_local_rank": fault.local,
        "wording_from": list(kind.sources) + list(wording()["shapes"][shape]["sources"]),
    }
    (case / "truth.json").write_text(json.dumps(truth, indent=1))
    return case


def _faulty_nodes(kind: Kind, spec: Spec, fault: Fault) -> list[str]:
    roots = [g for g in kind.groups if g.label == "root" and (not g.shapes or spec.shape in g.shapes)]
    if roots and all(g.where == "all_ranks" for g in roots):
        return []  # every rank hit the same error: no node is at fault
    return [spec.hosts[fault.node]]


def plan(cases: int, seed: int) -> list[tuple[str, Kind]]:
    """The (case name, fault kind) of every case: kinds in turn, so any len(kinds()) cases hold them all."""
    names = sorted(kinds())
    return [
        (f"og3-{seed}-{i:03d}-{names[i % len(names)]}", kinds()[names[i % len(names)]]) for i in range(cases)
    ]


def generate_corpus(out: Path, cases: int, seed: int) -> list[Path]:
    """Write `cases` labelled cases into `out` and its `cases.json`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dirs = [
        generate_case(out, name, kind, random.Random(f"othergen3:{seed}:{i}"))
        for i, (name, kind) in enumerate(plan(cases, seed))
    ]
    (out / "cases.json").write_text(
        json.dumps({"generator": "othergen3", "seed": seed, "cases": [d.name for d in dirs]}, indent=1)
    )
    return dirs
