"""`l4 bench othergen3 OUT --cases N --seed S`: the third outsider generator's corpus."""

from __future__ import annotations

import argparse

from bot.cli_othergen import write_corpus


def cmd_othergen3(args: argparse.Namespace) -> int:
    from engine.bench.othergen3 import generate_corpus

    return write_corpus(args, generate_corpus, "third outsider generator")


def register(bsub: argparse._SubParsersAction) -> None:
    og = bsub.add_parser(
        "othergen3",
        help="labelled failed jobs from a third independent generator "
        "(Ray Train, Horovod/Open MPI, SageMaker, AzureML, msrun shapes; "
        "held out)",
    )
    og.add_argument("out")
    og.add_argument("--cases", type=int, default=40)
    og.add_argument("--seed", type=int, default=1)
    og.set_defaults(func=cmd_othergen3)
