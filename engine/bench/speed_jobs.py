"""The jobs of the speed benchmark that are not a training run: where nothing repeats, and layouts.

* `free_text_job`: one rank file of distinct free-text lines (words drawn at random, no numbers),
  which folding cannot group: Drain's worst case; `lines` of them, or (lines 0) as many as fill
  `size` bytes.
* `random_bytes_job`: one rank file of random bytes (a core dump or a binary written by mistake).
* `one_file_job`: the rank files of a generated job concatenated, `copies` times, into one rank
  file (one huge file must stream like many small ones).
* `linked_job`: a job bigger than GENERATE_MAX made of a generated job's rank files hard-linked
  under more node names (`node-006-c2/…`), so a 17 GB job costs neither 17 GB of disk nor the
  generator's CPU time; every file is still parsed on its own.

Each writes a job folder (`job.json` and node folders, as CONTRACTS.md describes); `speed_job`
picks (and caches, or writes to a scratch folder it deletes afterwards) the job a
`l4 bench speed` command names.
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.ingest import discover

BLOCK = 8 << 20  # bytes written or copied at a time
ONE_FILE_SOURCE = 1_000_000_000  # the one-file layout concatenates copies of a job of at most this size
GENERATE_MAX = 2_000_000_000  # bigger jobs are hard-linked copies of a generated job of this size
_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pra", "stel", "gor", "phin",
              "dru", "quel", "ob", "ix", "an", "er", "un", "tor", "mal", "ven", "sil")


def _job_json(out: Path, job_id: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.json").write_text(json.dumps({"job_id": job_id, "status": "failed", "settings": {}}))


def free_text_job(out: Path, lines: int, seed: int = 0, size: int = 0) -> Path:
    """A job of one rank file holding `lines` distinct lines of 4–16 made-up words each (with
    `lines` 0: as many as make `size` bytes)."""
    rng = random.Random(f"l4-free-text:{seed}")
    vocab = sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4)))
                    for _ in range(5000)})
    _job_json(out, out.name)
    (out / "node-0").mkdir(exist_ok=True)
    seen: set[bytes] = set()  # digests of the lines written (a set of the lines would hold them all)
    written = 0
    with open(out / "node-0" / "rank-0.log", "w") as fh:
        while len(seen) < lines if lines > 0 else written < size:
            line = " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 16)))
            digest = hashlib.blake2b(line.encode(), digest_size=8).digest()
            if digest not in seen:
                seen.add(digest)
                fh.write(line + "\n")
                written += len(line) + 1
    return out


def random_bytes_job(out: Path, size: int, seed: int = 0) -> Path:
    """A job of one rank file of `size` random bytes."""
    rng = random.Random(f"l4-random-bytes:{seed}")
    _job_json(out, out.name)
    (out / "node-0").mkdir(exist_ok=True)
    with open(out / "node-0" / "rank-0.log", "wb") as fh:
        left = size
        while left > 0:
            n = min(BLOCK, left)
            fh.write(rng.randbytes(n))
            left -= n
    return out


def one_file_job(src: Path, out: Path, copies: int = 1) -> Path:
    """A job of one rank file: the rank files of job `src` one after the other, `copies` times."""
    _job_json(out, out.name)
    (out / "node-0").mkdir(exist_ok=True)
    files = [f.path for f in discover(src).files]
    with open(out / "node-0" / "rank-0.log", "wb") as dst:
        for _ in range(copies):
            for path in files:
                with open(path, "rb") as fh:
                    shutil.copyfileobj(fh, dst, BLOCK)
    return out


def linked_job(src: Path, out: Path, size: int) -> Path:
    """A job of about `size` bytes: the rank files of `src` hard-linked into `out`, the first copy
    under their own node names, the next ones as `<node>-c<k>`, until `size` is reached."""
    _job_json(out, out.name)
    files = discover(src).files
    total, copy = 0, 0
    while total < size:
        for f in files:
            rel = Path(f.path).relative_to(src)
            node = rel.parts[0] if copy == 0 else f"{rel.parts[0]}-c{copy}"
            dst = out / node / Path(*rel.parts[1:])
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                dst.hardlink_to(f.path)
            except OSError:  # another file system, or no hard links there
                shutil.copyfile(f.path, dst)
            total += f.size
            if total >= size:
                break
        copy += 1
    return out


def _job_name(size: int, seed: int, profile: str, layout: str, lines: int) -> str:
    if profile == "free-text":
        return f"free-text-{lines}-{seed}" if lines > 0 else f"free-text-{size}-bytes-{seed}"
    if profile == "random-bytes":
        return f"random-bytes-{size}-{seed}"
    suffix = "" if profile == "repetitive" else f"-{profile}"
    return f"{'one-file' if layout == 'one-file' else 'large'}-{size}-{seed}{suffix}"


def _make(root: Path, size: int, seed: int, profile: str, layout: str, lines: int) -> Path:
    """The job in `root` (made once: a finished job has a `.complete` marker)."""
    from engine.bench.generate import generate_large_job

    job = root / _job_name(size, seed, profile, layout, lines)
    if (job / ".complete").exists():
        return job
    if job.exists():
        shutil.rmtree(job)  # an earlier run stopped half-way
    started = time.perf_counter()
    print(f"generating {job.name} in {root}…", file=sys.stderr)
    if profile == "free-text":
        free_text_job(job, lines, seed, size)
    elif profile == "random-bytes":
        random_bytes_job(job, size, seed)
    elif layout == "one-file":
        _one_file(root, job, size, seed, profile)
    elif size > GENERATE_MAX:
        linked_job(_make(root, GENERATE_MAX, seed, profile, "ranks", lines), job, size)
    else:
        generate_large_job(job, size, seed=seed, profile=profile)
    (job / ".complete").write_text("ok")
    print(f"generated in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return job


def _one_file(cache: Path, job: Path, size: int, seed: int, profile: str) -> Path:
    """`job` as one rank file of about `size` bytes: copies of a (cached) job of at most 1 GB."""
    src = _make(cache, min(size, ONE_FILE_SOURCE), seed, profile, "ranks", 0)
    src_size = sum(f.size for f in discover(src).files)
    return one_file_job(src, job, max(1, round(size / src_size)))


@contextmanager
def speed_job(cache: Path, size: int, seed: int, profile: str, layout: str = "ranks", lines: int = 40_000,
              *, scratch: bool = False) -> Iterator[Path]:
    """The benchmark job these options name: cached in `cache` (made once), or with `scratch` made in
    a temporary folder that is deleted afterwards (the source job of the one-file layout stays cached)."""
    if not scratch:
        cache.mkdir(parents=True, exist_ok=True)
        yield _make(cache, size, seed, profile, layout, lines)
        return
    tmp = Path(tempfile.mkdtemp(prefix="l4-speed-"))
    try:
        if layout == "one-file" and profile not in ("free-text", "random-bytes"):
            cache.mkdir(parents=True, exist_ok=True)
            job = _one_file(cache, tmp / _job_name(size, seed, profile, layout, lines), size, seed, profile)
        elif size > GENERATE_MAX and profile not in ("free-text", "random-bytes"):
            cache.mkdir(parents=True, exist_ok=True)
            src = _make(cache, GENERATE_MAX, seed, profile, "ranks", lines)
            job = linked_job(src, tmp / _job_name(size, seed, profile, layout, lines), size)
        else:
            job = _make(tmp, size, seed, profile, layout, lines)
        yield job
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
