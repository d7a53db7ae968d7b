"""A fourth outsider's generator of labelled failed training jobs (`l4 bench othergen4`), written without
reading the engine, its data or the earlier generators: PaddlePaddle launch, multi-host JAX, Kubeflow and
Volcano pods in the kubelet's CRI format, DeepSpeed over pdsh and LSF jobs (see `shapes`)."""

from engine.bench.othergen4.corpus import generate_corpus

__all__ = ["generate_corpus"]
