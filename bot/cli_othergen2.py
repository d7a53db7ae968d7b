"""`l4 bench othergen2 OUT --cases N --seed S`: the second outsider generator's corpus."""
from __future__ import annotations

import argparse

from bot.cli_othergen import write_corpus


def cmd_othergen2(args: argparse.Namespace) -> int:
    from engine.bench.othergen2 import generate_corpus

    return write_corpus(args, generate_corpus, "second outsider generator")


def register(bsub: argparse._SubParsersAction) -> None:
    og = bsub.add_parser("othergen2", help="labelled failed jobs from a second independent generator "
                                           "(Kubernetes/SLURM/bare-metal shapes, kernel logs; held out)")
    og.add_argument("out")
    og.add_argument("--cases", type=int, default=40)
    og.add_argument("--seed", type=int, default=1)
    og.set_defaults(func=cmd_othergen2)
