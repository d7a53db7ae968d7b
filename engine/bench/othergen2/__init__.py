"""A second benchmark generator written from outside the engine (`l4 bench othergen2`): failed LLM
training jobs as Kubernetes, SLURM and bare-metal clusters collect them, with labels from what it wrote."""

from engine.bench.othergen2.corpus import generate_corpus

__all__ = ["generate_corpus"]
