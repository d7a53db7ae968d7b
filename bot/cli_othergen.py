"""`l4 bench othergen|othergen2|othergen3|othergen4 OUT --cases N --seed S`: the corpora of the outsider
generators (engine.bench.othergen*), each written by a helper who read neither the engine nor the
generators before it; their output is held out (README, "An outsider's generator" and after)."""
from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from pathlib import Path

from engine.ingest import JobError

# command (and module under engine.bench) → (what the summary line calls it, the --help text)
GENERATORS = {
    "othergen": ("outsider generator", "labelled failed jobs from an independent generator written without "
                                       "reading the engine (other log wording; held out)"),
    "othergen2": ("second outsider generator", "labelled failed jobs from a second independent generator "
                                               "(Kubernetes/SLURM/bare-metal shapes, kernel logs; held out)"),
    "othergen3": ("third outsider generator", "labelled failed jobs from a third independent generator "
                                              "(Ray Train, Horovod/Open MPI, SageMaker, AzureML, msrun "
                                              "shapes; held out)"),
    "othergen4": ("fourth outsider generator", "labelled failed jobs from a fourth independent generator "
                                               "(PaddlePaddle launch, multi-host JAX, Kubeflow/Volcano CRI "
                                               "pods, DeepSpeed over pdsh, LSF shapes; held out)"),
}


def cmd_othergen(args: argparse.Namespace) -> int:
    generate = importlib.import_module(f"engine.bench.{args.generator}").generate_corpus
    return write_corpus(args, generate, GENERATORS[args.generator][0])


def write_corpus(args: argparse.Namespace, generate: Callable[[Path, int, int], list[Path]],
                 label: str) -> int:
    """Check OUT and --cases, then write the corpus of a generator."""
    if args.cases < 1:
        raise JobError("--cases must be at least 1")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise JobError(f"not a folder: {out}")
    dirs = generate(out, args.cases, args.seed)
    print(f"generated {len(dirs)} cases in {out} ({label}, seed {args.seed})")
    return 0


def register(bsub: argparse._SubParsersAction) -> None:
    for name, (_, text) in GENERATORS.items():
        og = bsub.add_parser(name, help=text)
        og.add_argument("out")
        og.add_argument("--cases", type=int, default=40)
        og.add_argument("--seed", type=int, default=1)
        og.set_defaults(func=cmd_othergen, generator=name)
