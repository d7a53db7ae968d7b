"""`l4 bench othergen OUT --cases N --seed S`: the outsider generator's corpus (engine.bench.othergen)."""
from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from engine.ingest import JobError


def cmd_othergen(args: argparse.Namespace) -> int:
    from engine.bench.othergen import generate_corpus

    return write_corpus(args, generate_corpus, "outsider generator")


def write_corpus(args: argparse.Namespace, generate: Callable[[Path, int, int], list[Path]],
                 label: str) -> int:
    """Check OUT and --cases, then write the corpus of a generator (`l4 bench othergen`, `othergen2`)."""
    if args.cases < 1:
        raise JobError("--cases must be at least 1")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise JobError(f"not a folder: {out}")
    dirs = generate(out, args.cases, args.seed)
    print(f"generated {len(dirs)} cases in {out} ({label}, seed {args.seed})")
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    og = bsub.add_parser("othergen", help="labelled failed jobs from an independent generator written "
                                          "without reading the engine (other log wording; held out)")
    og.add_argument("out")
    og.add_argument("--cases", type=int, default=40)
    og.add_argument("--seed", type=int, default=1)
    og.set_defaults(func=cmd_othergen)
