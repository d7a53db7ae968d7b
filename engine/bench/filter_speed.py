"""Cost of tolerant cross-job filtering: N failed-job templates looked up in an M-template pool.

    python -m engine.bench.filter_speed [--failed 10000] [--pool 20000] [--seed 0]

Templates are synthetic but shaped like parsed training logs: most share a few header layouts
(host, timestamp, level, source location), so the index's frequent keys are realistic. Part of the
pool re-generalises failed-job templates the way another Drain run would (a word masked, a host
name or a step number changed); the rest is unrelated.
"""
from __future__ import annotations

import argparse
import random
import time

from engine.filter import NormalPool, candidate_events
from engine.model import ParsedJob, TemplateStat

HEADERS = (
    "<*>: [<*>] [INFO] [{f}.py:<*>:{fn}]",
    "<*>: [<*>] [WARNING] [{f}.py:<*>:{fn}]",
    "[Rank <*>]",
    "gpu-a00-<*>: [<*>] [INFO] [{f}.py:<*>:{fn}]",
    "NCCL INFO",
    "",
)


def _words(rng: random.Random, n: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def make_templates(rng: random.Random, count: int, vocab: list[str]) -> list[str]:
    out: set[str] = set()
    while len(out) < count:
        head = rng.choice(HEADERS).format(f=rng.choice(vocab[:50]), fn=rng.choice(vocab[:80]))
        body = [rng.choice(vocab) if rng.random() > 0.25 else "<*>" for _ in range(rng.randint(3, 18))]
        out.add(" ".join([head, *body]).strip())
    return list(out)


def regeneralise(rng: random.Random, template: str) -> str:
    """The same event as another parse might render it."""
    toks = template.split()
    i = rng.randrange(len(toks))
    if toks[0].endswith(":") and rng.random() < 0.3:
        toks[0] = "gpu-b00-<*>:"
    elif toks[i] != "<*>":
        toks[i] = "<*>"
    return " ".join(toks)


def run(failed: int, pool: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    vocab = _words(rng, 3000)
    failed_t = make_templates(rng, failed, vocab)
    related = [regeneralise(rng, t) for t in rng.sample(failed_t, min(failed, pool * 2 // 5))]
    pool_t = related + make_templates(rng, pool - len(related), vocab)
    job = ParsedJob(job_id="speed", templates=[TemplateStat(template=t) for t in failed_t])
    t0 = time.perf_counter()
    normal = NormalPool((), pool_t)
    built = time.perf_counter()
    left = candidate_events(job, normal)
    done = time.perf_counter()
    return {"failed": failed, "pool": len(pool_t), "related": len(related), "build_s": round(built - t0, 3),
            "lookup_s": round(done - built, 3), "filtered": failed - len(left)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--failed", type=int, default=10000)
    ap.add_argument("--pool", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    r = run(args.failed, args.pool, args.seed)
    print(f"{r['failed']} failed-job templates vs a {r['pool']}-template pool: index built in "
          f"{r['build_s']:.2f} s, lookups {r['lookup_s']:.2f} s; {r['filtered']} filtered as normal "
          f"({r['related']} have a re-generalised twin in the pool)")


if __name__ == "__main__":
    main()
