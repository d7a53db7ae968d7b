"""The pieces every real-run program shares: the tiny language model and the per-rank data shard."""

from __future__ import annotations

import json
import os
import signal

import _chaos as C
import torch
from torch.utils.data import Dataset, get_worker_info


class TinyLM(torch.nn.Module):
    def __init__(self, hidden: int, vocab: int = C.VOCAB) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU())
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.mlp(self.embed(tokens)))


class Shard(Dataset):
    """This rank's jsonl shard: one sample per line, ``{"id": n, "tokens": [SEQ ints]}``."""

    def __init__(self, path: str, batch: int) -> None:
        self.path, self.batch = path, batch
        self.samples = []
        with open(path) as f:
            for line in f:
                rec = json.loads(line)
                if len(rec["tokens"]) != C.SEQ:
                    raise ValueError(f"sample {rec['id']} in {path} has {len(rec['tokens'])} tokens, "
                                     f"expected {C.SEQ}")
                self.samples.append(rec["tokens"])

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        step = i // self.batch + 1
        if i % self.batch == 0 and get_worker_info() is not None:
            if C.active("dataloader_worker_crash", step):
                os.kill(os.getpid(), signal.SIGKILL)
            C.point("fetch", step)
        t = torch.tensor(self.samples[i])
        return t[:-1], t[1:]


def shard_path() -> str:
    return os.path.join(C.DATA, f"train-{C.LOCAL_RANK:02d}.jsonl")


def grow_cache() -> None:
    """Keep every step's activations alive until the host runs out of memory (capped address space)."""
    C.limit_memory()
    cache = []
    while True:
        if C.VARIANT % 2:
            cache.append(bytearray(48 << 20))
        else:
            cache.append(torch.ones(12 << 20))
