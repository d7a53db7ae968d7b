"""`l4 bench stage-model ...`: learn the stage model from labelled cases (engine/bench/stage_learn.py)."""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from engine.ingest import JobError

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "engine" / "data" / "stage_model.json"


def _records(args: argparse.Namespace) -> list:
    from engine.bench.stage_learn import extract, load_records
    from kb.known import library_signatures

    known = [] if getattr(args, "no_library", False) else library_signatures()  # as `l4 bench eval` reads it

    def extract_with_library(sources: list[Path], on_case: Callable[[str], None]) -> list:
        return extract(sources, on_case=on_case, known=known)

    return records_of(args, extract_with_library, load_records, "stage-model",
                      "no usable labelled cases (truth.json with a stage and a source)")


def records_of(args: argparse.Namespace, extract: Callable, load_records: Callable, command: str,
               none: str) -> list:
    """The records of `args.cases`: one records file of `l4 bench <command> extract`, else the cases
    extracted (`none`: what the error says when no case was usable)."""
    sources = [Path(s) for s in args.cases]
    missing = [s for s in sources if not s.exists()]
    if missing:
        raise JobError(f"no such file or folder: {missing[0]}")
    if len(sources) == 1 and sources[0].is_file():
        try:
            return load_records(sources[0])
        except (ValueError, KeyError, TypeError) as exc:
            raise JobError(f"{sources[0]} is not a records file of `l4 bench {command} extract`: "
                           f"{exc}") from None

    def show(name: str) -> None:
        if args.verbose:
            print(f"extracted {name}", file=sys.stderr)

    records = extract(sources, on_case=show)
    if not records:
        raise JobError(f"{none} under " + ", ".join(map(str, sources)))
    return records


def cmd_extract(args: argparse.Namespace) -> int:
    from engine.bench import stage_learn

    return extract_command(_records(args), stage_learn.save_records, args.out)


def extract_command(records: list, save_records: Callable, out: str) -> int:
    """`extract`: write the records, say how many."""
    save_records(records, Path(out))
    print(f"{len(records)} cases written to {out}")
    return 0


def cmd_cv(args: argparse.Namespace) -> int:
    from engine.bench import stage_learn

    return cv_command(_records(args), stage_learn.cross_validate, stage_learn.format_cv, args.group)


def cv_command(records: list, cross_validate: Callable, format_cv: Callable, group: str) -> int:
    """`cv`: cross-validate by `group`, print the tables (a grouping that cannot split: a one-line error)."""
    try:
        res = cross_validate(records, group=group)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    print(format_cv(res))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from engine.bench.stage_learn import best_combination, format_cv, train

    records = _records(args)
    model, res = train(records, Path(args.out))
    print(format_cv(res))
    name, _ = best_combination(res)
    print(f"\nwrote {args.out}: {len(model.weights)} features, combination {name}")
    return 0


def cmd_curve(args: argparse.Namespace) -> int:
    from engine.bench.stage_curve import format_curve, learning_curve

    records = _records(args)
    sizes = [int(k) for k in args.sizes.split(",")] if args.sizes else None
    try:
        points = learning_curve(records, sizes=sizes, draws=args.draws, seed=args.seed)
    except ValueError as exc:
        raise JobError(str(exc)) from None
    print(format_curve(points))
    return 0


def cmd_agreement(args: argparse.Namespace) -> int:
    """`agreement`: blind relabelling's answers against the labels, each other and the engine."""
    from engine.bench.stage_agreement import agreement, format_agreement, load_answers

    answers_file, corpus = Path(args.answers), Path(args.corpus)
    if not answers_file.is_file():
        raise JobError(f"no such answers file: {answers_file}")
    if not corpus.is_dir():
        raise JobError(f"no such corpus folder: {corpus}")
    try:
        answers = load_answers(answers_file)
        res = agreement(corpus, answers, None if args.no_engine else _engine_stage())
    except ValueError as exc:
        raise JobError(str(exc)) from None
    print(format_agreement(res))
    return 0


def _engine_stage() -> Callable[[Path], str]:
    """The stage `l4 bench eval` scores for a case folder (parse mode, with the fault library)."""
    from engine.bench.evaluate import diagnose_case
    from kb.known import library_signatures

    known = library_signatures()

    def stage(case: Path) -> str:
        return diagnose_case(case, known)[1].stage

    return stage


def register(bsub: argparse._SubParsersAction) -> None:
    sm = bsub.add_parser("stage-model", help="learn the stage model from labelled real cases")
    ssub = sm.add_subparsers(dest="stage_model_command", required=True)
    helps = {
        "extract": ("run the engine on the cases and write their features (minutes)", cmd_extract),
        "cv": ("cross-validation (leave one source or one public wave out): rules, model, combinations",
               cmd_cv),
        "train": ("pick the combination by cross-validation, fit on every case, write the model", cmd_train),
        "curve": ("learning curve: each public wave held out, the model fitted on k of the other waves",
                  cmd_curve),
    }
    ag = ssub.add_parser("agreement", help="blind relabelling of the stage from the logs alone: the "
                                           "annotators against the labels, each other and the engine")
    ag.add_argument("answers", help="answers file (JSON lines; tests/fixtures/stage_relabel/answers.jsonl)")
    ag.add_argument("--corpus", default="tests/fixtures/public_logs",
                    help="the case folders the answers name (default tests/fixtures/public_logs)")
    ag.add_argument("--no-engine", action="store_true", help="score the annotators only")
    ag.set_defaults(func=cmd_agreement)
    for name, (text, func) in helps.items():
        p = ssub.add_parser(name, help=text)
        p.add_argument("cases", nargs="+",
                       help="case folders (tests/fixtures/public_logs tests/fixtures/realrun …; held-out "
                            "test halves are skipped) or one records file of `extract`")
        p.add_argument("-v", "--verbose", action="store_true", help="one line per extracted case on stderr")
        p.add_argument("--no-library", action="store_true",
                       help="extract without the knowledge base's fault library as ranking evidence "
                            "(default: with it, as `l4 bench eval` and `l4 diagnose` rank)")
        if name == "extract":
            p.add_argument("-o", "--out", required=True, help="records file to write (JSON)")
        if name == "cv":
            p.add_argument("--group", choices=("source", "wave"), default="source",
                           help="hold out one source (repository, program style) or one public wave per fold")
        if name == "train":
            p.add_argument("-o", "--out", default=str(DEFAULT_OUT), help="model file to write")
        if name == "curve":
            p.add_argument("--sizes", help="numbers of public waves to train on, comma-separated "
                                           "(default: 1, 3, 5 … and all the other waves)")
            p.add_argument("--draws", type=int, default=3,
                           help="random draws of the waves per size (default 3)")
            p.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
        p.set_defaults(func=func)
