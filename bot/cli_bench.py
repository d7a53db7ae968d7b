"""`l4 bench ...`: the labeled benchmark (generate, eval), the speed bench and parser quality."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from engine.ingest import JobError


def cmd_generate(args: argparse.Namespace) -> int:
    from engine.bench.generate import generate_suite

    if args.cases < 1:
        raise JobError("--cases must be at least 1")
    kinds = args.kinds.split(",") if args.kinds else None
    dirs = generate_suite(Path(args.out), args.cases, args.seed, kinds=kinds)
    print(f"generated {len(dirs)} cases in {args.out}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from bot.bench_pool import kb_pool
    from engine.bench.evaluate import (
        HISTORY_MODES,
        SPLITS,
        case_dirs,
        evaluate,
        format_modes,
        format_report,
        summary,
    )
    from engine.bench.misses import format_misses
    from engine.bench.real_report import format_real_report, format_real_splits
    from kb.known import library_signatures

    root = Path(args.cases)
    if not root.is_dir() or not case_dirs(root):
        raise JobError(f"no benchmark cases in {root} (make them with `l4 bench generate`)")
    modes = [m.strip() for m in args.history_mode.split(",") if m.strip()]
    bad = [m for m in modes if m not in HISTORY_MODES]
    if bad or not modes:
        raise JobError(f"--history-mode takes {', '.join(HISTORY_MODES)} (comma-separated), "
                       f"not {args.history_mode!r}")
    splits = [s.strip() for s in args.split.split(",") if s.strip()]
    if not splits or any(s not in SPLITS for s in splits) or (len(splits) > 1 and len(modes) > 1):
        raise JobError(f"--split takes {', '.join(SPLITS)} (several, comma-separated, only with one "
                       f"--history-mode), not {args.split!r}")
    empty = [s for s in splits if not case_dirs(root, s)]
    if empty:
        raise JobError(f"no cases of split {empty[0]} in {root} (truth.json \"split\" is dev or test)")

    def show(name: str, info: dict) -> None:
        if args.verbose:
            print(f"{name}: {json.dumps(info)}", file=sys.stderr)

    known = [] if args.no_library else library_signatures()

    if len(splits) > 1:
        by_split = {s: evaluate(root, on_case=show, history_mode=modes[0], pool_of=kb_pool, split=s,
                                 known=known)
                    for s in splits}
        first = next(iter(by_split.values()))
        print(format_real_splits(by_split) if first.real else
              "\n\n".join(f"## split {s}\n\n{format_report(r)}" for s, r in by_split.items()))
        if args.json:
            Path(args.json).write_text(json.dumps({s: summary(r) for s, r in by_split.items()}, indent=2))
        if args.show_misses:
            print("\n" + "\n\n".join(format_misses(r) for r in by_split.values()))
        return 0
    results = {m: evaluate(root, on_case=show, history_mode=m, pool_of=kb_pool, split=splits[0], known=known)
               for m in modes}
    if len(results) == 1:
        res = results[modes[0]]
        print(format_real_report(res) if res.real else format_report(res))
    else:
        print(format_modes(results))
    if args.show_misses:
        print("\n" + "\n\n".join(format_misses(r) for r in results.values()))
    if args.json:
        figures = {m: summary(r) for m, r in results.items()}
        Path(args.json).write_text(json.dumps(figures[modes[0]] if len(modes) == 1 else figures, indent=2))
    return 0


def cmd_hang(args: argparse.Namespace) -> int:
    from engine.bench.hang_eval import evaluate_hangs, format_hangs, hang_cases

    root = Path(args.cases)
    if not root.is_dir() or not hang_cases(root):
        raise JobError(f"no hang cases in {root} (the fixtures are in tests/fixtures/hang; "
                       "`l4 bench hangrun OUT` makes new ones)")
    tallies = evaluate_hangs(root, split=args.split)
    if not tallies:
        raise JobError(f"no hang cases of split {args.split!r} in {root}")
    print(format_hangs(tallies))
    return 0


def cmd_hangrun(args: argparse.Namespace) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise JobError("l4 bench hangrun runs real torchrun jobs: pip install torch==2.13.0 first") from None
    from engine.bench.hangrun.harness import compress, generate

    out = Path(args.out)
    generate(out, timeout=args.timeout)
    if args.compress:
        compress(out)
    return 0


def _cache_dir() -> Path:
    return Path(os.environ.get("L4_CACHE_DIR") or Path.home() / ".cache" / "l4")


def cmd_speed(args: argparse.Namespace) -> int:
    from engine.bench.speed import PHASES, format_run, format_speed, parse_size, run_speed
    from engine.bench.speed_jobs import speed_job

    try:
        size = parse_size(args.size)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    phases = tuple(p for p in (args.phases or "").split(",") if p)
    if bad := [p for p in phases if p not in PHASES]:
        raise JobError(f"unknown phase {bad[0]!r}; use some of {', '.join(PHASES)}")
    with speed_job(_cache_dir() / "bench", size, args.seed, args.profile, args.layout, args.lines,
                   scratch=args.scratch) as job:
        files = [f for f in job.rglob("*") if f.is_file() and f.name not in ("job.json", ".complete")]
        total = sum(f.stat().st_size for f in files)
        if args.executor == "dask":
            try:
                from engine.bench.dask_speed import format_dask_speed, run_dask_speed
            except ImportError:
                raise JobError("--executor dask needs dask: pip install 'l4[dask]'") from None
            print(format_dask_speed(run_dask_speed(job, scheduler=args.scheduler), total))
            return 0
        baseline = Path(args.baseline).resolve() if args.baseline else None
        if baseline is not None and not (baseline / "engine" / "bench" / "speed.py").is_file():
            raise JobError(f"--baseline {args.baseline}: not a checkout of this repository")
        if args.executor == "pool" or (not phases and not args.against
                                       and args.profile in ("free-text", "random-bytes")):
            name = "diagnose-pool" if args.executor == "pool" else "diagnose-1core"
            for row in run_speed(job, phases=(name,), grep=False, baseline=baseline):  # baseline first
                print(format_run(row, len(files), args.profile))
            return 0
        if args.against:  # the same phases on another profile's job of the same size, in this run
            with speed_job(_cache_dir() / "bench", size, args.seed, args.against, args.layout, args.lines,
                           scratch=args.scratch) as other:
                rows = run_speed(job, phases=phases or PHASES, baseline=baseline,
                                 against=(args.against, other))
        else:
            rows = run_speed(job, phases=phases or PHASES, baseline=baseline)
        print(format_speed(rows, total, args.profile))
    return 0


def cmd_loghub(args: argparse.Namespace) -> int:
    from engine.bench.loghub import format_table, score_all

    root = Path(args.loghub_dir)
    if not root.is_dir():
        raise JobError(f"no such folder: {root}")
    print(format_table(score_all(root, gt=args.gt)))
    return 0


def cmd_realrun_generate(args: argparse.Namespace) -> int:
    import importlib.util

    from engine.bench.realrun.corpus import generate

    if importlib.util.find_spec("torch") is None:
        raise JobError("`l4 bench realrun generate` runs real torch programs: pip install torch==2.13.0 "
                       "(or the `realrun` extra) first")
    split = lambda v: [x.strip() for x in v.split(",") if x.strip()] if v else None  # noqa: E731
    if args.per_kind < 1:
        raise JobError("--per-kind must be at least 1")
    try:
        rows = generate(Path(args.out), split(args.kinds), split(args.styles), per_kind=args.per_kind,
                        cases=split(args.cases), wave=args.wave)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    print(f"{len(rows)} cases in {args.out}")
    return 0


def cmd_realrun_check(args: argparse.Namespace) -> int:
    from engine.bench.realrun.check import check_corpus

    root = Path(args.corpus)
    if not root.is_dir():
        raise JobError(f"no such folder: {root}")
    problems = check_corpus(root)
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(list(root.glob('*/truth.json')))} cases in {root}: well formed")
    return 1 if problems else 0


def cmd_realrun_relabel(args: argparse.Namespace) -> int:
    from engine.bench.realrun.corpus import InjectionNotObserved, relabel

    root = Path(args.corpus)
    if not root.is_dir():
        raise JobError(f"no such folder: {root}")
    try:
        n = relabel(root)
    except InjectionNotObserved as exc:
        raise JobError(str(exc)) from None
    print(f"labelled {n} cases in {root} again")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmarks: labeled cases, accuracy, speed, parser quality")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    g = bsub.add_parser("generate", help="generate labeled failed jobs with succeeded history jobs")
    g.add_argument("out")
    g.add_argument("--cases", type=int, default=48)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--kinds", help="comma-separated fault kinds (default: all but the opt-in straggler "
                                   "and fabric_stall)")
    g.set_defaults(func=cmd_generate)
    e = bsub.add_parser("eval", help="score L4 and the baselines on labeled cases (generated or real)")
    e.add_argument("cases")
    e.add_argument("--json", help="also write the overall figures as JSON here")
    e.add_argument("-v", "--verbose", action="store_true", help="one line per case on stderr")
    e.add_argument("--show-misses", action="store_true",
                   help="after the tables, list the cases whose stage is wrong or root cause not first")
    e.add_argument("--history-mode", default="parse", metavar="MODE[,MODE...]",
                   help="where normal events come from: parse (history parsed with the failed job; default), "
                        "pool (failed job alone vs. a knowledge-base pool learned from separate parses), "
                        "none; several, comma-separated, print a side-by-side table")
    e.add_argument("--split", default="all", metavar="SPLIT[,SPLIT...]",
                   help="the cases of one half: dev, test (truth.json \"split\") or all (default); several, "
                        "comma-separated, print a side-by-side table. Cases labeling root_lines are scored "
                        "on the root cause first/among the first 3 against grep and Error_time")
    e.add_argument("--no-library", action="store_true",
                   help="rank without the knowledge base's fault library as evidence (default: with it)")
    e.set_defaults(func=cmd_eval)
    s = bsub.add_parser("speed", help="throughput and peak memory on a large generated job")
    s.add_argument("--size", default="1GB")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--executor", choices=("local", "pool", "dask"), default="local",
                   help="local: the table of phases; pool: only the whole diagnosis with the process pool, "
                        "end to end (wall, CPU, RSS of parent and workers, load average); dask: parse on a "
                        "LocalCluster of 1 and 2 workers (or --scheduler) and model 16")
    s.add_argument("--scheduler", default=None, help="with --executor dask: an existing cluster's address")
    s.add_argument("--profile", choices=["repetitive", "unique-tokens", "mixed", "free-text", "random-bytes"],
                   default="repetitive",
                   help="repetitive: lines differ only in numbers; unique-tokens: most lines carry hex "
                        "pointers, comm ids, object reprs, UUIDs, temporary names, IPv6; mixed: some "
                        "(engine/bench/data/speed.yaml); free-text: one file of --lines distinct lines of "
                        "made-up words; random-bytes: one file of --size random bytes")
    s.add_argument("--layout", choices=["ranks", "one-file"], default="ranks",
                   help="one-file: the generated job's rank files concatenated into one rank file of --size")
    s.add_argument("--lines", type=int, default=40_000,
                   help="lines of the free-text profile (0: as many as fill --size)")
    s.add_argument("--against", default=None,
                   choices=["repetitive", "unique-tokens", "mixed", "free-text", "random-bytes"],
                   help="also run each phase on this profile's job of the same --size, right before, "
                        "for a ratio under the same load (its rows say the profile)")
    s.add_argument("--phases", default=None,
                   help="comma-separated phases to run (parse-1core, diagnose-1core, diagnose-pool, "
                        "naive-drain3); default all")
    s.add_argument("--baseline", default=None,
                   help="a checkout of another commit (git worktree add /tmp/old COMMIT): each phase is also "
                        "run by its engine, right before this one's, for a ratio under the same load")
    s.add_argument("--scratch", action="store_true",
                   help="generate the job in a temporary folder and delete it afterwards (big sizes), "
                        "instead of caching it")
    s.set_defaults(func=cmd_speed)
    hg = bsub.add_parser("hang", help="hang cases diagnosed with and without their flight-recorder and "
                                      "stack dumps")
    hg.add_argument("cases", nargs="?", default="tests/fixtures/hang", help="folder of hang cases")
    hg.add_argument("--split", choices=("dev", "test", "all"), default="all")
    hg.set_defaults(func=cmd_hang)
    hr = bsub.add_parser("hangrun", help="make hang cases from real torchrun/gloo jobs (needs torch)")
    hr.add_argument("out", help="folder to write the cases into")
    hr.add_argument("--timeout", type=float, default=10.0, help="the jobs' collective timeout, seconds")
    hr.add_argument("--compress", action="store_true", help="gzip the rank logs (as the fixtures are)")
    hr.set_defaults(func=cmd_hangrun)
    lh = bsub.add_parser("loghub", help="grouping accuracy of the parser on Loghub-2k")
    lh.add_argument("loghub_dir")
    lh.add_argument("--gt", choices=["orig", "corr"], default="orig")
    lh.set_defaults(func=cmd_loghub)
    rr = bsub.add_parser("realrun", help="real-run corpus: torchrun/gloo jobs on the CPU, faults injected")
    rsub = rr.add_subparsers(dest="realrun_command", required=True)
    rg = rsub.add_parser("generate", help="run and label the corpus (needs torch; minutes)")
    rg.add_argument("out")
    rg.add_argument("--kinds", help="comma-separated fault kinds (default: all in kinds.yaml)")
    rg.add_argument("--styles", help="comma-separated program styles: ddp, megatron, hf, lightning, "
                    "accelerate, nanogpt, fabric, titan, deepspeed, fsdp2, tp, tune (default: all)")
    rg.add_argument("--per-kind", type=int, default=2, help="cases per fault kind (default 2)")
    rg.add_argument("--cases", help="comma-separated case names: run only these again")
    rg.add_argument("--wave", type=int, help="only the cases of this wave (5: with --per-kind 12, "
                    "6: with --per-kind 14, 7: with --per-kind 16)")
    rg.set_defaults(func=cmd_realrun_generate)
    rc = rsub.add_parser("check", help="is a corpus well formed (root lines verbatim, splits, kinds)")
    rc.add_argument("corpus")
    rc.set_defaults(func=cmd_realrun_check)
    rl = rsub.add_parser("relabel", help="label a corpus again from its logs (no runs)")
    rl.add_argument("corpus")
    rl.set_defaults(func=cmd_realrun_relabel)
    from bot.cli_stage_model import register as register_stage_model

    register_stage_model(bsub)
    from bot.cli_root_model import register as register_root_model

    register_root_model(bsub)
    from bot.cli_othergen import register as register_othergen

    register_othergen(bsub)
