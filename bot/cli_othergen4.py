"""`l4 bench othergen4 OUT --cases N --seed S`: the fourth outsider generator's corpus."""

from __future__ import annotations

import argparse

from bot.cli_othergen import write_corpus


def cmd_othergen4(args: argparse.Namespace) -> int:
    from engine.bench.othergen4 import generate_corpus

    return write_corpus(args, generate_corpus, "fourth outsider generator")


def register(bsub: argparse._SubParsersAction) -> None:
    og = bsub.add_parser(
        "othergen4",
        help="labelled failed jobs from a fourth independent generator "
        "(PaddlePaddle launch, multi-host JAX, Kubeflow/Volcano CRI pods, DeepSpeed over pdsh, LSF shapes; "
        "held out)",
    )
    og.add_argument("out")
    og.add_argument("--cases", type=int, default=40)
    og.add_argument("--seed", type=int, default=1)
    og.set_defaults(func=cmd_othergen4)
