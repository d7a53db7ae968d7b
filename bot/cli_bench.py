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
    from engine.bench.evaluate import HISTORY_MODES, case_dirs, evaluate, format_modes, format_report, summary

    root = Path(args.cases)
    if not root.is_dir() or not case_dirs(root):
        raise JobError(f"no benchmark cases in {root} (make them with `l4 bench generate`)")
    modes = [m.strip() for m in args.history_mode.split(",") if m.strip()]
    bad = [m for m in modes if m not in HISTORY_MODES]
    if bad or not modes:
        raise JobError(f"--history-mode takes {', '.join(HISTORY_MODES)} (comma-separated), "
                       f"not {args.history_mode!r}")

    def show(name: str, info: dict) -> None:
        if args.verbose:
            print(f"{name}: {json.dumps(info)}", file=sys.stderr)

    results = {m: evaluate(root, on_case=show, history_mode=m, pool_of=kb_pool) for m in modes}
    if len(results) == 1:
        print(format_report(results[modes[0]]))
    else:
        print(format_modes(results))
    if args.json:
        figures = {m: summary(r) for m, r in results.items()}
        Path(args.json).write_text(json.dumps(figures[modes[0]] if len(modes) == 1 else figures, indent=2))
    return 0


def _cache_dir() -> Path:
    return Path(os.environ.get("L4_CACHE_DIR") or Path.home() / ".cache" / "l4")


def cmd_speed(args: argparse.Namespace) -> int:
    from engine.bench.generate import generate_large_job
    from engine.bench.speed import format_speed, parse_size, run_speed

    try:
        size = parse_size(args.size)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    suffix = "" if args.profile == "repetitive" else f"-{args.profile}"
    job = _cache_dir() / "bench" / f"large-{size}-{args.seed}{suffix}"
    if not (job / ".complete").exists():
        print(f"generating a {size / 1e9:.2f} GB {args.profile} job in {job} (once; cached)…",
              file=sys.stderr)
        generate_large_job(job, size, seed=args.seed, profile=args.profile)
        (job / ".complete").write_text("ok")
    rows = run_speed(job)
    total = sum(f.stat().st_size for f in job.rglob("*") if f.is_file())
    print(format_speed(rows, total, args.profile))
    return 0


def cmd_loghub(args: argparse.Namespace) -> int:
    from engine.bench.loghub import format_table, score_all

    root = Path(args.loghub_dir)
    if not root.is_dir():
        raise JobError(f"no such folder: {root}")
    print(format_table(score_all(root, gt=args.gt)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    bench = sub.add_parser("bench", help="benchmarks: labeled cases, accuracy, speed, parser quality")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    g = bsub.add_parser("generate", help="generate labeled failed jobs with succeeded history jobs")
    g.add_argument("out")
    g.add_argument("--cases", type=int, default=48)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--kinds", help="comma-separated fault kinds (default: all)")
    g.set_defaults(func=cmd_generate)
    e = bsub.add_parser("eval", help="score L4 and the baselines on generated cases")
    e.add_argument("cases")
    e.add_argument("--json", help="also write the overall figures as JSON here")
    e.add_argument("-v", "--verbose", action="store_true", help="one line per case on stderr")
    e.add_argument("--history-mode", default="parse", metavar="MODE[,MODE...]",
                   help="where normal events come from: parse (history parsed with the failed job; default), "
                        "pool (failed job alone vs. a knowledge-base pool learned from separate parses), "
                        "none; several, comma-separated, print a side-by-side table")
    e.set_defaults(func=cmd_eval)
    s = bsub.add_parser("speed", help="throughput and peak memory on a large generated job")
    s.add_argument("--size", default="1GB")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--profile", choices=["repetitive", "unique-tokens", "mixed"], default="repetitive",
                   help="repetitive: lines differ only in numbers; unique-tokens: most lines carry hex "
                        "pointers, comm ids, object reprs, UUIDs, temporary names, IPv6; mixed: some "
                        "(engine/bench/data/speed.yaml)")
    s.set_defaults(func=cmd_speed)
    lh = bsub.add_parser("loghub", help="grouping accuracy of the parser on Loghub-2k")
    lh.add_argument("loghub_dir")
    lh.add_argument("--gt", choices=["orig", "corr"], default="orig")
    lh.set_defaults(func=cmd_loghub)
