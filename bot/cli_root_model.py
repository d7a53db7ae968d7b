"""`l4 bench root-model ...`: learn the root-cause order from labelled cases (engine/bench/root_learn.py)."""
from __future__ import annotations

import argparse
from pathlib import Path


def _records(args: argparse.Namespace) -> list:
    from bot.cli_stage_model import records_of
    from engine.bench.root_learn import extract, load_records

    return records_of(args, extract, load_records, "root-model",
                      "no usable labelled cases (truth.json with root_lines or indicating lines)")


def cmd_extract(args: argparse.Namespace) -> int:
    from bot.cli_stage_model import extract_command
    from engine.bench import root_learn

    return extract_command(_records(args), root_learn.save_records, args.out)


def cmd_cv(args: argparse.Namespace) -> int:
    from bot.cli_stage_model import cv_command
    from engine.bench import root_learn

    return cv_command(_records(args), root_learn.cross_validate, root_learn.format_cv, args.group)


def cmd_census(args: argparse.Namespace) -> int:
    import sys

    from engine.bench import root_census

    def tell(name: str) -> None:
        print(name, file=sys.stderr)

    results = root_census.census([Path(c) for c in args.cases], tell if args.verbose else None)
    if not results:
        print("error: no usable labelled cases (truth.json with root_lines or indicating lines)",
              file=sys.stderr)
        return 2
    if args.json:
        root_census.save(results, Path(args.json))
    print(root_census.format_census(results, details=not args.counts))
    return 0


def _severity_cases(args: argparse.Namespace) -> list:
    import sys

    from engine.bench.severity_learn import load_cases

    def tell(name: str) -> None:
        print(name, file=sys.stderr)

    return load_cases([Path(c) for c in args.cases], tell if args.verbose else None)


def cmd_severity_cv(args: argparse.Namespace) -> int:
    import sys

    from engine.bench import root_learn, severity_learn

    cases = _severity_cases(args)
    if not cases:
        print("error: no usable labelled cases (truth.json with root_lines or indicating lines)",
              file=sys.stderr)
        return 2
    try:
        res = severity_learn.cross_validate(cases, root_learn.settings()["severity"], args.group)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(severity_learn.format_cv(res))
    return 0


def cmd_ablate(args: argparse.Namespace) -> int:
    import sys

    from engine.bench import lexicon_ablation
    from kb.known import library_signatures

    def tell(moved: lexicon_ablation.Moved) -> None:
        print(f"{moved.name}: {len(moved.cases)} moved", file=sys.stderr)

    known = [] if args.no_library else library_signatures()
    only = [n for n in (args.only or "").split(",") if n]
    moved = lexicon_ablation.ablate([Path(c) for c in args.cases], known, only,
                                    tell if args.verbose else None)
    if args.json:
        import json

        Path(args.json).write_text(json.dumps({m.name: m.cases for m in moved}, indent=1))
    print(lexicon_ablation.format_ablation(moved))
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    rm = bsub.add_parser("root-model", help="learn the order of the root cause from labelled cases")
    rsub = rm.add_subparsers(dest="root_model_command", required=True)
    helps = {
        "extract": ("run the engine on the cases, write their candidates' features (minutes)", cmd_extract),
        "cv": ("leave-one-group-out cross-validation: the hand order, the learned order, a blend", cmd_cv),
        "census": ("why the root is not first: each miss's reason, counts per corpus", cmd_census),
        "severity-cv": ("leave-one-group-out check of the learned root severity against the lexicon",
                        cmd_severity_cv),
        "ablate": ("switch each severity-lexicon entry off in turn: root ranks moved per wave (minutes)",
                   cmd_ablate),
    }
    for name, (text, func) in helps.items():
        p = rsub.add_parser(name, help=text)
        p.add_argument("cases", nargs="+",
                       help="case folders (public, real-run, othergen seed 1, `l4 bench generate` cases; "
                            "held-out halves are skipped) or one records file of `extract`")
        p.add_argument("-v", "--verbose", action="store_true", help="one line per extracted case on stderr")
        if name == "extract":
            p.add_argument("out", help="records file to write (JSON)")
        if name == "census":
            p.add_argument("--json", help="also write every case's result here")
            p.add_argument("--counts", action="store_true", help="the counts table only")
        if name == "severity-cv":
            p.add_argument("--group", choices=("wave", "corpus", "source"), default="wave",
                           help="hold out one wave (public, real-run; each generator), corpus or source")
        if name == "ablate":
            p.add_argument("--only", help="comma-separated entries (terms[3],roles.report[0],...)")
            p.add_argument("--no-library", action="store_true", help="rank without the fault library")
            p.add_argument("--json", help="also write each entry's moved cases here")
        if name == "cv":
            p.add_argument("--group", choices=("wave", "source"), default="wave",
                           help="hold out one wave (public, real-run; othergen; synthetic) or one source")
        p.set_defaults(func=func)
