"""A third outsider's benchmark generator (`l4 bench othergen3`): failed LLM-training jobs in shapes
the earlier generators do not write (Ray Train, Horovod/Open MPI consoles, SageMaker per-host streams,
AzureML flat per-process files with torchelastic error files, MindSpore msrun with Ascend plogs),
labelled from what was generated. Wording and faults live in ``data/*.yaml``."""

from engine.bench.othergen3.corpus import generate_corpus

__all__ = ["generate_corpus"]
