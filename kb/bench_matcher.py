"""Benchmark: match 10k templates x 3 raw examples against the full built-in library.

    python -m kb.bench_matcher [--templates N] [--repeat R]

Prints the time to build the matcher and to match, in milliseconds.
"""
from __future__ import annotations

import argparse
import random
import time

from engine.model import TemplateStat
from kb.library import builtin_patterns
from kb.matcher import Matcher

_NORMAL = [
    " iteration {i:>8}/  250000 | consumed samples: {n:>12} | elapsed time per iteration (ms): {f:.1f} |"
    " learning rate: 9.150E-06 | global batch size:  1024 | lm loss: {l:.6E} | loss scale: 1.0 |"
    " grad norm: {g:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |",
    "node{a}-{b}:{p}:{p} [{r}] NCCL INFO Channel {c:02d}/0 : {r}[{h:x}] -> {c}[{h:x}] via P2P/IPC/read",
    "[2024-10-22 12:37:{s:02d},{ms:03d}] [INFO] [logging.py:69:log_dist] [Rank {r}] step={i}, skipped=0,"
    " lr=[5e-05], mom=[[0.9, 0.999]]",
    "[INFO|trainer.py:2926] 2023-10-19 09:48:{s:02d},{ms:03d} >> Saving model checkpoint to"
    " out/checkpoint-{i}",
    "[rank{r}]:[W{p} ProcessGroupNCCL.cpp:{c}] Warning: event {h:x} recorded on stream {a}"
    " module_{b}.layer_{c}",
]
_FAULTS = [
    "[E ProcessGroupNCCL.cpp:916] [Rank {r}] NCCL watchdog thread terminated with exception: CUDA error:"
    " uncorrectable ECC error encountered",
    "NVRM: Xid (PCI:0000:{h:02x}:00): 79, pid={p}, GPU has fallen off the bus.",
    "node{a}-{b}:{p}:{p} [{r}] NCCL WARN NET/IB : Got completion from peer 10.0.{a}.{b}<{p}> with error 12,"
    " opcode 0, len 0, vendor err 129",
]


def make_templates(n: int, seed: int = 0, fault_every: int = 100) -> list[TemplateStat]:
    rnd = random.Random(seed)
    out = []
    for t in range(n):
        shapes = _FAULTS if t % fault_every == 0 else _NORMAL
        shape = shapes[t % len(shapes)]
        examples = []
        for _ in range(3):
            examples.append(shape.format(
                i=rnd.randrange(10**6), n=rnd.randrange(10**9), f=rnd.random() * 1e5, l=rnd.random() * 3,
                g=rnd.random(), a=rnd.randrange(256), b=rnd.randrange(256), p=rnd.randrange(10**6),
                r=rnd.randrange(8), c=rnd.randrange(64), h=rnd.randrange(1 << 20), s=rnd.randrange(60),
                ms=rnd.randrange(1000)) + f" #{t}")
        out.append(TemplateStat(template=f"template {t} <*>", count=rnd.randrange(1, 1000),
                                examples=examples))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--templates", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    patterns = builtin_patterns()
    t0 = time.perf_counter()
    matcher = Matcher(patterns)
    build_ms = (time.perf_counter() - t0) * 1000
    templates = make_templates(args.templates)
    lines = sum(len(t.examples) for t in templates)
    best = float("inf")
    matches = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        matches = matcher.match_templates(templates)
        best = min(best, (time.perf_counter() - t0) * 1000)
    print(f"patterns: {len(matcher)} ({sum(len(p['signature']) for p in patterns)} signature entries); "
          f"build: {build_ms:.1f} ms")
    print(f"match {len(templates)} templates x 3 examples ({lines} lines): {best:.1f} ms "
          f"(best of {args.repeat}); {len(matches)} patterns matched: {[m.pattern_id for m in matches]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
