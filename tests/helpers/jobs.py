"""Builders of small job folders on disk (CONTRACTS §1) for tests."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

NORMAL_ITER = (
    " iteration {it:8d}/    1000 | consumed samples: {s:10d} | lm loss: {loss:.6E} | grad norm: 0.{g:03d} |"
)
TIMER = "[rank{r}]: [2026-05-01 10:{m:02d}:{sec:02d},123] [INFO] [timers] forward-backward: {ms}.2 ms"


def write_rank(path: Path, lines: list[str], *, gz: bool = False, newline_at_end: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "\n".join(lines) + ("\n" if newline_at_end else "")
    if gz:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def write_failed_job(root: Path, files: dict[str, list[str]]) -> Path:
    """A failed job folder of the given files (path inside the job -> lines) and its job.json."""
    root.mkdir(parents=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for rel, lines in files.items():
        write_rank(root / rel, lines)
    return root


def training_lines(rank: int, iterations: int, start: int = 1) -> list[str]:
    out = [f"[rank{rank}]: [2026-05-01 10:00:00,000] [INFO] > initializing torch distributed ..."]
    for it in range(start, start + iterations):
        m, sec = divmod(it * 7, 60)
        out.append(TIMER.format(r=rank, m=m % 60, sec=sec, ms=300 + (it * 13 + rank) % 50))
        out.append(NORMAL_ITER.format(it=it, s=it * 512, loss=2.5 - it * 0.001, g=(it * 7) % 1000))
    return out


def make_job(
    root: Path,
    *,
    nodes: int = 4,
    ranks_per_node: int = 2,
    iterations: int = 30,
    status: str = "failed",
    fault_node: int | None = 2,
    fault_at: int = 20,
    fault_lines: tuple[str, ...] = ("RuntimeError: CUDA error: uncorrectable ECC error encountered",),
    settings: dict | None = None,
) -> Path:
    """A job with `nodes` nodes; when `fault_node` is set that node's ranks stop at `fault_at` with
    `fault_lines`, and the other ranks log a watchdog timeout."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.json").write_text(
        json.dumps(
            {
                "job_id": root.name,
                "status": status,
                "settings": settings or {"model": "toy", "framework": "megatron"},
            }
        )
    )
    for n in range(nodes):
        for r in range(ranks_per_node):
            rank = n * ranks_per_node + r
            if fault_node is None:
                lines = training_lines(rank, iterations)
            elif n == fault_node:
                lines = training_lines(rank, fault_at) + list(fault_lines)
            else:
                lines = training_lines(rank, fault_at) + [
                    f"[rank{rank}]:[E0501 10:40:00.000000000 ProcessGroupNCCL.cpp:607] [Rank {rank}] "
                        "Watchdog caught "
                    f"collective operation timeout: WorkNCCL(SeqNum={4000 + fault_at}, OpType=ALLREDUCE) "
                        "ran for "
                    "600044 milliseconds before timing out."
                ]
            write_rank(root / f"node-{n:03d}" / f"rank-{rank:04d}.log", lines)
    return root


def publish_gz(www: Path, job_id: str = "job-0042", **kwargs: object) -> Path:
    """A failed job under ``www/logs/<job_id>/`` with every rank file gzip-compressed, as a log
    service stores it (serve ``www`` with ``tests.helpers.http_server.HttpServer``)."""
    job = make_job(www / "logs" / job_id, **{"nodes": 4, "fault_node": 2, **kwargs})  # type: ignore[arg-type]
    return gzip_ranks(job)


def gzip_ranks(job: Path) -> Path:
    """Replace every ``*.log`` rank file of ``job`` by its ``*.log.gz``; returns ``job``."""
    for f in list(job.rglob("*.log")):
        f.with_name(f.name + ".gz").write_bytes(gzip.compress(f.read_bytes()))
        f.unlink()
    return job


def insert_lines(root: Path, node: int, lines_for_rank: Callable[[int], Iterable[str]]) -> None:
    """Insert `lines_for_rank(rank)` after the first line of every rank file of node `node` of a
    job built by `make_job` (e.g. noise that succeeded and failed jobs both log)."""
    for f in sorted(root.glob(f"node-{node:03d}/rank-*.log")):
        rank = int(f.stem.split("-")[1])
        lines = f.read_text(encoding="utf-8").splitlines()
        lines[1:1] = list(lines_for_rank(rank))
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")


_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pra", "stel", "gor", "phin", "dru",
              "quel", "ob", "ix", "un", "tor", "mal", "ven", "sil")


def prose_lines(count: int, seed: int = 0, prefix: str = "") -> list[str]:
    """`count` distinct lines of 4–16 made-up words (no digits), each after `prefix`: generated
    text, prompts or per-step prose that nothing folds into a repeat."""
    rng = random.Random(f"prose:{seed}")
    vocab = sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))) for _ in range(3000)})
    out: dict[str, None] = {}
    while len(out) < count:
        out[prefix + " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 16)))] = None
    return list(out)


def write_system_log(root: Path, node: int, lines: list[str], name: str = "dmesg.log") -> Path:
    """A node's system log (dmesg, journal, syslog) beside the rank files of a job built by `make_job`."""
    return write_rank(root / f"node-{node:03d}" / name, lines)


def journald_lines(messages: Iterable[str], start: datetime, step: float = 1.0, priority: int = 6,
                   host: str = "node") -> list[str]:
    """`messages` as `journalctl -o json` writes them: one JSON object per line, the message in
    MESSAGE, its syslog PRIORITY, the time in __REALTIME_TIMESTAMP (microseconds), `step` seconds apart."""
    t0 = int(start.timestamp() * 1_000_000)
    return [json.dumps({"MESSAGE": m, "PRIORITY": str(priority), "SYSLOG_IDENTIFIER": "python3",
                        "_HOSTNAME": host, "_PID": "4242",
                        "__REALTIME_TIMESTAMP": str(t0 + int(i * step * 1e6))})
            for i, m in enumerate(messages)]
