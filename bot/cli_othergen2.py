"""`l4 bench othergen2 OUT --cases N --seed S`: the second outsider generator's corpus."""

from __future__ import annotations

import argparse
from pathlib import Path

from engine.ingest import JobError


def cmd_othergen2(args: argparse.Namespace) -> int:
    from engine.bench.othergen2 import generate_corpus

    if args.cases < 1:
        raise JobError("--cases must be at least 1")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise JobError(f"not a folder: {out}")
    dirs = generate_corpus(out, args.cases, args.seed)
    print(f"generated {len(dirs)} cases in {out} (second outsider generator, seed {args.seed})")
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    og = bsub.add_parser(
        "othergen2",
        help="labelled failed jobs from a second independent generator "
        "(Kubernetes/SLURM/bare-metal shapes, kernel logs; held out)",
    )
    og.add_argument("out")
    og.add_argument("--cases", type=int, default=40)
    og.add_argument("--seed", type=int, default=1)
    og.set_defaults(func=cmd_othergen2)
