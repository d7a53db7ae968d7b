"""The speed benchmark's jobs where nothing repeats, and its layouts (engine/bench/speed_jobs.py)."""
import subprocess
import sys
from pathlib import Path

from engine.bench import speed_jobs
from engine.bench.generate import generate_large_job
from engine.bench.speed import format_run, run_speed
from engine.ingest import discover


def _lines(job: Path) -> list[bytes]:
    return b"".join(Path(f.path).read_bytes() for f in discover(job).files).splitlines()


def test_free_text_lines_are_distinct_and_carry_no_digits(tmp_path):
    lines = _lines(speed_jobs.free_text_job(tmp_path / "ft", 500))
    assert len(lines) == len(set(lines)) == 500
    assert not any(ch.isdigit() for ln in lines for ch in ln.decode())


def test_random_bytes_job_has_the_size_asked(tmp_path):
    job = speed_jobs.random_bytes_job(tmp_path / "rb", 100_000)
    assert [f.size for f in discover(job).files] == [100_000]


def test_one_file_and_linked_layouts_keep_every_line(tmp_path):
    src = generate_large_job(tmp_path / "src", 2_000_000, seed=3)
    src_lines = _lines(src)
    one = speed_jobs.one_file_job(src, tmp_path / "one", copies=2)
    assert len(discover(one).files) == 1 and sorted(_lines(one)) == sorted(src_lines * 2)
    size = sum(f.size for f in discover(src).files)
    linked = speed_jobs.linked_job(src, tmp_path / "linked", int(size * 2.5))
    files = discover(linked).files
    assert sum(f.size for f in files) >= size * 2.5
    assert {f.node for f in files} >= {f"{f.node}-c2" for f in discover(src).files[:1]}


def test_pool_run_reports_wall_cpu_rss_and_load(tmp_path):
    job = generate_large_job(tmp_path / "big", 3_000_000, seed=1)
    [row] = run_speed(job, phases=("diagnose-pool",), grep=False)
    text = format_run(row, len(discover(job).files), "repetitive")
    for part in ("wall", "CPU/2" if row["cores"] == 2 else "CPU/", "parent", "load average"):
        assert part in text


def test_cli_runs_a_scratch_job_and_deletes_it(tmp_path):
    out = subprocess.run([sys.executable, "-m", "bot.cli", "bench", "speed", "--profile", "random-bytes",
                          "--size", "200KB", "--scratch"], capture_output=True, text=True,
                         env={"L4_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin",
                              "TMPDIR": str(tmp_path)}, check=True)
    assert "phase diagnose-1core" in out.stdout and "peak RSS" in out.stdout
    assert not list(tmp_path.glob("l4-speed-*"))


def test_baseline_checkout_runs_each_phase_right_before_this_engine(tmp_path):
    job = generate_large_job(tmp_path / "big", 1_000_000, seed=2)
    root = Path(__file__).resolve().parents[3]
    rows = run_speed(job, phases=("parse-1core",), grep=False, baseline=root)
    assert [r["phase"] for r in rows] == [f"parse-1core ({root.name})", "parse-1core"]
