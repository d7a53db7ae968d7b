"""Generate the real-run corpus: history runs per style, then one failed run per case, labelled.

Layout (what `l4 bench eval` reads)::

    OUT/cases.json
    OUT/<case>/failed/<node>/...log.gz   OUT/<case>/history/h1/...   OUT/<case>/truth.json
    OUT/_history/<style>-h1/...   the succeeded runs per style; every case's history/h* links to them,
                                  and later calls reuse them (delete the folder to run them again)
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from engine.bench.realrun.label import label
from engine.bench.realrun.launch import RunResult, run_job
from engine.bench.realrun.layout import LogFile, log_files, read_job, write_job
from engine.bench.realrun.plan import NPROC, RunPlan, assign_splits, case_plans, kind_spec, plan_run, split_of

HISTORY = "_history"
# hf and lightning runs cost the most (transformers or lightning imported on every rank)
HISTORY_RUNS = {"ddp": 2, "megatron": 2, "hf": 1, "lightning": 1, "accelerate": 1, "nanogpt": 1, "fabric": 1,
                "titan": 1, "deepspeed": 1, "fsdp2": 1, "tp": 1, "tune": 1}
SETTINGS = {"ddp": {"model": "tinylm-64", "framework": "pytorch-ddp", "image": "torch-2.13.0-cpu"},
            "megatron": {"model": "gpt-tiny-64", "framework": "megatron", "image": "torch-2.13.0-cpu"},
            "lightning": {"model": "tinylm-64", "framework": "lightning",
                          "image": "torch-2.13.0-cpu-lightning"},
            "hf": {"model": "gpt2-tiny", "framework": "hf-trainer", "image": "torch-2.13.0-cpu-transformers"},
            "accelerate": {"model": "tinylm-64", "framework": "hf-accelerate",
                           "image": "torch-2.13.0-cpu-accelerate"},
            "nanogpt": {"model": "nanogpt-tiny-64", "framework": "nanogpt", "image": "torch-2.13.0-cpu"},
            "fabric": {"model": "tinylm-64", "framework": "lightning-fabric",
                       "image": "torch-2.13.0-cpu-lightning"},
            "titan": {"model": "llama3-debugmodel", "framework": "torchtitan", "image": "torch-2.13.0-cpu"},
            "deepspeed": {"model": "tinylm-64", "framework": "deepspeed-zero1", "image": "torch-2.13.0-cpu"},
            "fsdp2": {"model": "tinylm-64", "framework": "pytorch-fsdp2", "image": "torch-2.13.0-cpu"},
            "tp": {"model": "tinylm-64", "framework": "pytorch-dtensor-tp", "image": "torch-2.13.0-cpu"},
            "tune": {"model": "tinylm-64", "framework": "torchtune-recipe", "image": "torch-2.13.0-cpu"}}
# styles whose checkpoint is a folder (accelerate's save_state step_N, a DCP step-N of titan, DeepSpeed's
# global_stepN, a DCP step_NNNNNN of fsdp2, a DCP step-N of tp): a resume case gets the whole folder
STATE_DIR_STYLES = ("accelerate", "titan", "deepspeed", "fsdp2", "tp")
STATE_DIR = re.compile(r"^(?:step[-_]|global_step)(\d+)$")


def _state_dirs(folder: Path) -> list[Path]:
    """The checkpoint folders in ``folder``, oldest step first."""
    found = [p for p in folder.glob("*step*") if p.is_dir() and STATE_DIR.match(p.name)]
    return sorted(found, key=lambda p: int(STATE_DIR.match(p.name)[1]))


class InjectionNotObserved(RuntimeError):
    """The run's logs show no root line of the injected fault."""


def _job_json(job_id: str, status: str, style: str, res: RunResult) -> dict:
    return {"job_id": job_id, "status": status, "settings": SETTINGS[style],
            "launcher": "torchrun --rdzv-backend c10d", "collected": res.plan.layout}


def run_history(style: str, n: int, scratch: Path, out: Path) -> Path:
    """A succeeded run of ``style`` written to ``out``; returns a checkpoint it saved (for resume cases)."""
    plan = plan_run(f"{style}-history-{n}", style, None, seed=100 + n)
    res = run_job(plan, scratch)
    bad = {k: v for k, v in res.returncodes.items() if v != 0}
    if bad:
        raise RuntimeError(f"history run {plan.name} failed on {bad}; see {scratch}")
    write_job(out, log_files(res), _job_json(plan.name, "succeeded", style, res))
    keep = resume_of(out.parent, style)
    if style in STATE_DIR_STYLES:  # the last save_state folder, step_<N> (DCP: step-<N>)
        states = _state_dirs(scratch / "ckpt")
        if states:
            if keep.is_dir():
                shutil.rmtree(keep)
            shutil.copytree(states[-1], keep / states[-1].name)
        return keep / states[-1].name if states else keep
    ckpts = sorted((scratch / "ckpt").rglob("*.pt"))
    if ckpts:
        shutil.copyfile(ckpts[-1], keep)
    return keep


def resume_of(history: Path, style: str) -> Path:
    """Where the history runs of ``style`` keep a checkpoint for the resume cases."""
    return history / (f".resume-{style}" if style in STATE_DIR_STYLES else f".resume-{style}.pt")


def _resume_path(history: Path, style: str) -> Path | None:
    keep = resume_of(history, style)
    if style in STATE_DIR_STYLES:
        found = _state_dirs(keep) if keep.is_dir() else []
        return found[-1] if found else None
    return keep if keep.is_file() else None


def truth_of(plan: RunPlan, files: list[LogFile], ranks: dict[tuple[str, int], int], split: str) -> dict:
    """truth.json of a failed run from the logs it wrote and the global rank of every (node, local rank)."""
    spec = kind_spec(plan.kind or "")
    labels = label(plan, files, {k: {"rank": r} for k, r in ranks.items()})
    if not labels["root_lines"]:
        raise InjectionNotObserved(f"{plan.name}: no root line of {plan.kind} in the logs")
    fnode = plan.nodes[plan.fault_node] if plan.scope == "local" and plan.fault_node is not None else None
    fault_ranks = sorted(r for (node, loc), r in ranks.items() if node == fnode and loc in plan.fault_locals)
    if plan.scope == "rank0":
        fnode, fault_ranks = next((node for (node, _), r in ranks.items() if r == 0), None), [0]
    iteration = {"step": plan.step, "next": plan.step + 1, "none": None}[spec.get("iteration", "none")]
    return {
        "case_id": plan.name, "kind": plan.kind, "category": spec["category"], "style": plan.style,
        "source": f"realrun/{plan.style}", "split": split, "stage": spec["stage"], "iteration": iteration,
        "faulty_nodes": [fnode] if spec.get("faulty_node") and fnode else [],
        **labels,
        "fault": {"node": fnode, "local_ranks": plan.fault_locals if plan.scope == "local" else [],
                  "ranks": fault_ranks, "scope": plan.scope, "step": plan.step, "variant": plan.variant},
        "nodes": {n: {"tz": tz, "timestamps": fmt}
                  for n, (tz, fmt) in zip(plan.nodes, plan.clocks, strict=True)},
        "layout": plan.layout, "world_size": len(plan.nodes) * NPROC,
        "steps": plan.steps, "save_every": plan.save_every, "prefix": plan.prefix, "wave": plan.wave,
        **({"restarts": plan.restarts} if plan.restarts else {}),
        **({"monitor_interval": plan.monitor_interval} if plan.monitor_interval != 0.5 else {}),
        "ranks": {f"{node}/{loc}": r for (node, loc), r in sorted(ranks.items())},
    }


def plan_of(truth: dict) -> RunPlan:
    """The plan a case was run from (plans are a function of the case name ``<kind>-<style>-<n>``)."""
    n = int(truth["case_id"].rsplit("-", 1)[1])
    return plan_run(truth["case_id"], truth["style"], truth["kind"], seed=n, variant=n - 1)


def relabel(root: Path) -> int:
    """Label every case under ``root`` again from its committed logs (after a change to the labeller or
    to ``kinds.yaml``; no torch, no runs). Returns the number of cases."""
    n = 0
    for case in sorted(p.parent for p in root.glob("*/truth.json")):
        truth = json.loads((case / "truth.json").read_text())
        ranks = {(k.rsplit("/", 1)[0], int(k.rsplit("/", 1)[1])): int(v) for k, v in truth["ranks"].items()}
        truth = truth_of(plan_of(truth), read_job(case / "failed", ranks), ranks, truth["split"])
        (case / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
        n += 1
    if (root / "cases.json").is_file():
        write_wave_views(root)
    return n


# (wave, the number of its first case), the latest first
WAVE_FIRST_CASE = ((7, 15), (6, 13), (5, 11), (4, 7), (3, 5), (2, 3), (1, 1))


def write_wave_views(root: Path) -> dict[int, int]:
    """``root/_wave1/`` to ``root/_wave7/`` (4: the development runs, cases -7 to -10): the cases of each
    wave as links beside a cases.json of their own, so that `l4 bench eval root/_wave3 --split test,dev`
    scores a held-out wave alone. Returns the number of cases per wave."""
    rows = json.loads((root / "cases.json").read_text())
    waves: dict[int, list[dict]] = {}
    for row in rows:
        n = int(row["case_id"].rsplit("-", 1)[1])
        wave = next(w for w, first in WAVE_FIRST_CASE if n >= first)
        waves.setdefault(wave, []).append(row)
    for wave, wrows in sorted(waves.items()):
        view = root / f"_wave{wave}"
        if view.is_dir():
            shutil.rmtree(view)
        view.mkdir()
        for row in wrows:
            (view / row["path"]).symlink_to(f"../{row['path']}")
        (view / "cases.json").write_text(json.dumps(wrows, indent=1) + "\n")
    return {w: len(r) for w, r in sorted(waves.items())}


def write_case(out: Path, plan: RunPlan, res: RunResult, split: str, history: list[Path]) -> dict:
    """Label a finished failed run and write its case folder; returns its row of ``cases.json``."""
    if res.returncodes and all(code == 0 for code in res.returncodes.values()):
        raise InjectionNotObserved(f"{plan.name}: the job did not fail")
    files = log_files(res)
    truth = truth_of(plan, files, {k: int(v["rank"]) for k, v in res.ranks.items()}, split)
    case = out / plan.name
    if case.is_dir():
        shutil.rmtree(case)
    write_job(case / "failed", files, _job_json(plan.name, "failed", plan.style, res))
    (case / "history").mkdir()
    for n, h in enumerate(history, 1):  # links: the corpus stays small
        (case / "history" / f"h{n}").symlink_to(os.path.relpath(h, case / "history"))
    (case / "truth.json").write_text(json.dumps(truth, indent=1, ensure_ascii=False) + "\n")
    return {"case_id": plan.name, "path": plan.name, "kind": plan.kind, "style": plan.style,
            "category": truth["category"], "split": split, "source": truth["source"]}


def generate(out: Path, kinds: list[str] | None = None, styles: list[str] | None = None, *, per_kind: int = 2,
             cases: list[str] | None = None, scratch: Path | None = None,
             log: Callable[[str], None] | None = None, wave: int | None = None) -> list[dict]:
    """Run and label the corpus into ``out``; returns the index rows (also in ``out/cases.json``).
    ``cases`` runs only the named cases of the corpus (to run one again); ``wave`` only the cases of
    that wave (5: the -11/-12 cases of ``--per-kind 12``; 6: the -13/-14 cases of ``--per-kind 14``; 7: the
    -15/-16 cases of ``--per-kind 16``)."""
    say = log or (lambda m: print(m, file=sys.stderr))
    out.mkdir(parents=True, exist_ok=True)
    scratch = scratch or out / ".scratch"
    plans = case_plans(kinds, styles, per_kind)
    # wave 1 (cases -1, -2): a kind's cases alternate between the halves in hash order; wave 2 (-3 on):
    # each case by the hash of its own name, so growing the corpus never moves an earlier case
    splits = assign_splits({p.name: p.kind or "" for p in plans if p.wave == 1})
    splits.update({p.name: split_of(p.name) for p in plans if p.wave >= 2})  # wave 3 (-5, -6) alike
    if cases:
        unknown = sorted(set(cases) - {p.name for p in plans})
        if unknown:
            raise ValueError(f"no such cases: {', '.join(unknown)}")
        plans = [p for p in plans if p.name in cases]
    if wave is not None:
        plans = [p for p in plans if p.wave == wave]
        if not plans:
            raise ValueError(f"no cases of wave {wave} (wave 5 needs --per-kind 12, wave 6 --per-kind 14, "
                             "wave 7 --per-kind 16)")
    index_path = out / "cases.json"
    index = {r["case_id"]: r for r in json.loads(index_path.read_text())} if index_path.is_file() else {}
    history: dict[str, list[Path]] = {}
    resume: dict[str, Path] = {}
    t_all = time.monotonic()
    skipped: list[str] = []
    for style in sorted({p.style for p in plans}):
        history[style] = []
        for n in range(1, HISTORY_RUNS[style] + 1):
            dst = out / HISTORY / f"{style}-h{n}"
            t0 = time.monotonic()
            history[style].append(dst)
            found = _resume_path(out / HISTORY, style)
            if (dst / "job.json").is_file() and found is not None:
                resume[style] = found
                continue  # from an earlier call: a corpus grown kind by kind shares its history runs
            if dst.is_dir():
                shutil.rmtree(dst)
            resume[style] = run_history(style, n, scratch / f"{style}-h{n}", dst)
            say(f"history {style}-h{n}: {time.monotonic() - t0:.0f} s")
    for plan in plans:
        t0 = time.monotonic()
        res = run_job(plan, scratch / plan.name,
                      resume=resume[plan.style] if plan.kind == "ckpt_load_corrupt" else None)
        try:
            row = write_case(out, plan, res, splits[plan.name], history[plan.style])
        except InjectionNotObserved as exc:
            say(f"SKIPPED {exc} ({time.monotonic() - t0:.0f} s; its run stays in {scratch / plan.name})")
            skipped.append(plan.name)
            continue
        index[plan.name] = row
        index_path.write_text(json.dumps(sorted(index.values(), key=lambda r: r["case_id"]), indent=1) + "\n")
        shutil.rmtree(scratch / plan.name, ignore_errors=True)
        say(f"{plan.name}: {res.seconds:.0f} s ({row['split']})")
    if index:
        write_wave_views(out)
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    say(f"generated {len(index)} cases in {out} in {time.monotonic() - t_all:.0f} s "
        f"(CPU of the runs: {cpu.ru_utime + cpu.ru_stime:.0f} s)")
    if not skipped:
        shutil.rmtree(scratch, ignore_errors=True)
    return sorted(index.values(), key=lambda r: r["case_id"])
