"""`l4 bench speed`'s accounting (engine/bench/speed.py): what a phase counts as start-up."""
from engine.bench import speed_jobs
from engine.bench.speed import _run_phase, format_run, format_speed
from engine.ingest import discover
from tests.helpers.jobs import make_job


def test_the_diagnosis_s_own_scikit_learn_import_is_start_up_not_throughput(tmp_path):
    job = make_job(tmp_path / "job", nodes=4)
    assert len({f.node for f in discover(job).files}) >= 3  # the spatial forest runs, so it imports
    row = _run_phase("diagnose-1core", job)  # a fresh process: scikit-learn not imported yet
    assert row["lazy_import_cpu_seconds"] > 0
    assert row["startup_seconds"] > 0 and row["cpu_seconds"] > 0
    row.update(cores=1, mb_per_s=1.0, mb_per_s_per_core=1.0, mb_per_cpu_s=1.0)
    assert "scikit-learn, which the diagnosis imports on first use" in format_speed([row], row["bytes"])
    assert "scikit-learn's import on first use included" in format_run(row, 1, "repetitive")


def test_a_job_that_never_needs_the_forest_has_no_lazy_import(tmp_path):
    job = speed_jobs.random_bytes_job(tmp_path / "rb", 50_000)  # one rank file: fewer than three nodes
    row = _run_phase("diagnose-1core", job)
    assert row["lazy_import_cpu_seconds"] == 0.0
    assert "scikit-learn" not in format_run({**row, "cores": 1, "mb_per_s": 1.0, "mb_per_cpu_s": 1.0}, 1,
                                            "random-bytes")
