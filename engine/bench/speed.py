"""`l4 bench speed`: throughput and peak memory of parsing and of the whole diagnosis.

Every phase runs in a fresh subprocess so that its peak RSS is its own. All phases run in one
invocation, so the ratios between them are measured under the same machine load.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.ingest import discover

NAIVE_SAMPLE_BYTES = 32 * 1024 * 1024  # naive Drain3 is slow: it is timed on a prefix of the job
PHASES = ("parse-1core", "diagnose-1core", "diagnose-pool", "naive-drain3", "fold-1core")
LOAD_EVERY = 2.0  # seconds between samples of the load average during a phase
SIMPLE_MASKS = [  # the masking of Drain3's example (as in Loghub's score_ga.py)
    (r"((?<=[^A-Za-z0-9])|^)(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}(:\d+)?)((?=[^A-Za-z0-9])|$)", "IP"),
    (r"((?<=[^A-Za-z0-9])|^)(0[xX][0-9a-fA-F]+)((?=[^A-Za-z0-9])|$)", "HEX"),
    (r"((?<=[^A-Za-z0-9])|^)([\-\+]?\d+(\.\d+)?)((?=[^A-Za-z0-9])|$)", "NUM"),
]


def _peak_rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def _cpu_seconds(children: bool = True) -> float:
    """CPU time of this process and (if `children`) of its finished children (the pool's workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = own.ru_utime + own.ru_stime
    return mine + kids.ru_utime + kids.ru_stime if children else mine


def phase(name: str, job: str) -> dict:
    """Run one phase in this process and return its figures. Imports (Python start-up, sklearn…) are
    timed apart: they are a fixed cost per process, not throughput (scikit-learn, which the
    diagnosis imports on first use, too: `_LazyImport`; its CPU seconds are in the row)."""
    t_import = time.perf_counter()
    from engine.diagnose import diagnose
    from engine.executors import InProcessExecutor, PoolExecutor
    from engine.parse import parse_job

    startup = time.perf_counter() - t_import
    size = sum(f.size for f in discover(job).files)
    lazy = _LazyImport()
    loads = _LoadSampler()
    t0, c0, own0 = time.perf_counter(), _cpu_seconds(), _cpu_seconds(children=False)
    if name == "parse-1core":
        parse_job(job, executor=InProcessExecutor())
        processed = size
    elif name in ("diagnose-1core", "diagnose-pool"):
        ex = InProcessExecutor() if name == "diagnose-1core" else PoolExecutor()
        diagnose(job, executor=ex)
        processed = size
    elif name == "naive-drain3":
        processed = _naive_drain(job)
    elif name == "fold-1core":
        processed, secs, cpu = _fold_only(job)
        return {"phase": name, "bytes": processed, "seconds": secs, "cpu_seconds": cpu,
                "parent_cpu_seconds": cpu, "startup_seconds": startup, "peak_rss_mb": _peak_rss_mb(),
                "worker_rss_mb": None, "load": loads.stop()}
    else:
        raise ValueError(name)
    secs = time.perf_counter() - t0 - lazy.seconds
    return {"phase": name, "bytes": processed, "seconds": secs,
            "cpu_seconds": _cpu_seconds() - c0 - lazy.cpu_seconds,
            "parent_cpu_seconds": _cpu_seconds(children=False) - own0 - lazy.cpu_seconds,
            "startup_seconds": startup + lazy.seconds, "lazy_import_cpu_seconds": lazy.cpu_seconds,
            "peak_rss_mb": _peak_rss_mb(),
            "worker_rss_mb": _peak_rss_mb(resource.RUSAGE_CHILDREN) if name == "diagnose-pool" else None,
            "load": loads.stop()}


class _LazyImport:
    """Times the diagnosis's own first import of scikit-learn (`engine.spatial.isolation_forest`,
    called on a job of three nodes or more), a fixed cost per process like the imports above, so
    that a phase counts it with its start-up: until commit 320ab18 made the import lazy, it was
    part of `import engine.diagnose`. `seconds` and `cpu_seconds` (of this process: the pool's
    workers never import it) stay 0 where the diagnosis never needed it."""

    def __init__(self) -> None:
        import engine.spatial as spatial

        self.seconds = self.cpu_seconds = 0.0
        inner = spatial.isolation_forest

        def timed() -> type:
            if "sklearn.ensemble" in sys.modules:
                return inner()
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return inner()
            finally:
                self.seconds += time.perf_counter() - t0
                self.cpu_seconds += time.process_time() - c0

        spatial.isolation_forest = timed


class _LoadSampler:
    """The 1-minute load average, sampled every LOAD_EVERY seconds while a phase runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._done = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True, name="l4-load")
        self._thread.start()

    def _sample(self) -> None:
        try:
            self.samples.append(os.getloadavg()[0])
        except OSError:
            pass

    def _run(self) -> None:
        while not self._done.wait(LOAD_EVERY):
            self._sample()

    def stop(self) -> list[float]:
        """(min, mean, max) of the samples (empty where the system gives no load average)."""
        self._done.set()
        self._thread.join()
        self._sample()
        if not self.samples:
            return []
        return [min(self.samples), sum(self.samples) / len(self.samples), max(self.samples)]


def _fold_only(job: str) -> tuple[int, float, float]:
    """The folding pass alone (engine/_fold.c, as the parse calls it on every block): bytes, wall
    and CPU seconds of the calls only (reading the files is not counted)."""
    from engine.fold import fold_block_values
    from engine.ingest import ReadReport, iter_chunks
    from engine.scan import VALUE_WIDTH

    done, secs, cpu = 0, 0.0, 0.0
    for f in discover(job).files:
        for chunk in iter_chunks(f.path, ReadReport()):
            t0, c0 = time.perf_counter(), time.process_time()
            fold_block_values(chunk.data, VALUE_WIDTH)
            secs += time.perf_counter() - t0
            cpu += time.process_time() - c0
            done += len(chunk.data)
    return done, secs, cpu


def _naive_drain(job: str) -> int:
    from drain3 import TemplateMiner
    from drain3.masking import MaskingInstruction
    from drain3.template_miner_config import TemplateMinerConfig

    cfg = TemplateMinerConfig()
    cfg.profiling_enabled = False
    cfg.masking_instructions = [MaskingInstruction(p, n) for p, n in SIMPLE_MASKS]
    miner = TemplateMiner(config=cfg)
    done = 0
    for f in discover(job).files:
        with open(f.path, "rb") as fh:
            for raw in fh:
                miner.add_log_message(raw.decode("utf-8", "replace").rstrip("\n"))
                done += len(raw)
                if done >= NAIVE_SAMPLE_BYTES:
                    return done
    return done


def _run_phase(name: str, job: Path, engine_root: Path | None = None) -> dict:
    """One phase in a fresh subprocess; with `engine_root`, the engine of that checkout (another
    commit's `git worktree`, same Python environment) runs it."""
    env, cwd = None, None
    if engine_root is not None:
        env = {**os.environ, "PYTHONPATH": str(engine_root)}
        cwd = str(engine_root)
    out = subprocess.run(
        [sys.executable, "-m", "engine.bench.speed", name, str(job)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )
    row = json.loads(out.stdout.strip().splitlines()[-1])
    if engine_root is not None:
        row["phase"] = f"{name} ({engine_root.name})"
    return row


def _labelled(row: dict, label: str) -> dict:
    row["phase"] += label
    return row


def _grep(job: Path) -> dict:
    files = [f.path for f in discover(job).files]
    size = sum(os.path.getsize(p) for p in files)
    t0, c0 = time.perf_counter(), _cpu_seconds()
    subprocess.run(["grep", "-c", "", *files], check=False, capture_output=True)
    return {"phase": "grep -c", "bytes": size, "seconds": time.perf_counter() - t0,
            "cpu_seconds": _cpu_seconds() - c0, "startup_seconds": None, "peak_rss_mb": None,
            "worker_rss_mb": None}


def run_speed(job: Path, pool_workers: int | None = None, phases: tuple[str, ...] = PHASES,
              grep: bool = True, baseline: Path | None = None,
              against: tuple[str, Path] | None = None) -> list[dict]:
    """`grep -c` (if `grep`) and each of `phases`, one subprocess each, one after the other; with
    `baseline` (another checkout of the repository), each phase is run by that engine right
    before this one, so that both see the same machine load; with `against` (a profile's name and
    its job), each phase is run on that job too, right before, and its rows say the profile."""
    rows = [_grep(job)] if grep else []
    for name in phases:
        for other in ([(against[1], f" [{against[0]}]")] if against else []) + [(job, "")]:
            if baseline is not None and name != "naive-drain3":
                rows.append(_labelled(_run_phase(name, other[0], baseline), other[1]))
            rows.append(_labelled(_run_phase(name, other[0]), other[1]))
    cores = pool_workers or os.cpu_count() or 1
    for r in rows:
        mbps = r["bytes"] / 1e6 / r["seconds"] if r["seconds"] else 0.0
        r["cores"] = cores if r["phase"].startswith("diagnose-pool") else 1
        r["mb_per_s"] = mbps
        r["mb_per_s_per_core"] = mbps / r["cores"]
        r["mb_per_cpu_s"] = r["bytes"] / 1e6 / r["cpu_seconds"] if r["cpu_seconds"] else 0.0
    return rows


def format_speed(rows: list[dict], job_bytes: int, profile: str = "repetitive") -> str:
    # by CPU time: the ratio holds on a machine that others share (wall time per core does not)
    base = next((r["mb_per_cpu_s"] for r in rows if r["phase"] == "naive-drain3"), 0.0)
    out = [
        f"job: {job_bytes / 1e9:.2f} GB, profile {profile}, {os.cpu_count()} cores, load average {_load()}",
        "",
        "| phase | cores | MB/s | MB/s per core | MB per CPU-second | × naive Drain3 (CPU) | peak RSS MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rss = f"{r['peak_rss_mb']:.0f}" if r["peak_rss_mb"] is not None else "–"
        if r.get("worker_rss_mb"):
            rss += f" (workers {r['worker_rss_mb']:.0f})"
        ratio = f"{r['mb_per_cpu_s'] / base:.1f}" if base else "–"
        out.append(
            f"| {r['phase']} | {r['cores']} | {r['mb_per_s']:.1f} | {r['mb_per_s_per_core']:.1f} | "
            f"{r['mb_per_cpu_s']:.1f} | {ratio} | {rss} |"
        )
    startups = [r["startup_seconds"] for r in rows if r.get("startup_seconds") is not None]
    if startups:
        lo, hi = min(startups), max(startups)
        out += ["", f"Start-up (imports) per process, not included above: {lo:.1f}–{hi:.1f} s."]
    lazy = [r["lazy_import_cpu_seconds"] for r in rows if r.get("lazy_import_cpu_seconds")]
    if lazy:
        out[-1] += (f" It holds scikit-learn, which the diagnosis imports on first use: "
                    f"{min(lazy):.1f}–{max(lazy):.1f} CPU-seconds.")
    return "\n".join(out)


def format_run(row: dict, files: int, profile: str) -> str:
    """One phase end to end: wall and CPU seconds, CPU seconds per core (the wall time on an idle
    machine with that many cores), peak RSS of the parent and of the largest pool worker, and the
    load average while it ran (the machine may be shared)."""
    cores = row["cores"]
    load = row.get("load") or []
    loads = f"min {load[0]:.1f}, mean {load[1]:.1f}, max {load[2]:.1f}" if load else "unknown"
    rss = f"parent {row['peak_rss_mb']:.0f} MB"
    if row.get("worker_rss_mb"):
        rss += f", largest worker {row['worker_rss_mb']:.0f} MB"
    return "\n".join([
        f"job: {_size(row['bytes'])} in {files} rank file{'s' if files != 1 else ''}, profile {profile}, "
        f"phase {row['phase']} "
        f"on {cores} core{'s' if cores > 1 else ''} ({os.cpu_count()} on this machine)",
        f"wall {row['seconds']:.1f} s, {row['mb_per_s']:.1f} MB/s wall; CPU {row['cpu_seconds']:.1f} s, "
        f"CPU/{cores} = {row['cpu_seconds'] / cores:.1f} s (the wall on an idle {cores}-core machine), "
        f"{row['mb_per_cpu_s']:.1f} MB per CPU-second; start-up {row['startup_seconds']:.1f} s apart"
        + (f" (scikit-learn's import on first use included: {row['lazy_import_cpu_seconds']:.1f} CPU-s)"
           if row.get("lazy_import_cpu_seconds") else ""),
        f"CPU of the parent (merging the files' results, then the analysis, which runs in it alone): "
        f"{row.get('parent_cpu_seconds', 0.0):.1f} s",
        f"peak RSS: {rss}",
        f"load average (1 min) during the run: {loads}",
    ])


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?)B?\s*", text.upper())
    if not m:
        raise ValueError(f"bad size {text!r}; use e.g. 200MB or 1GB")
    return round(float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)])


if __name__ == "__main__":
    print(json.dumps(phase(sys.argv[1], sys.argv[2])))
