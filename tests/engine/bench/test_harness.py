"""The benchmark harness end to end on a tiny size (accuracy figures come from `l4 bench eval`)."""
from engine.bench.evaluate import evaluate, format_report, summary
from engine.bench.generate import generate_large_job, generate_suite
from engine.bench.speed import format_speed, parse_size, run_speed


def test_eval_on_a_few_generated_cases(tmp_path):
    generate_suite(tmp_path, 3, seed=5, kinds=["xid79", "oom", "node_hang"])
    res = evaluate(tmp_path)
    report = format_report(res)
    assert "| **all** | 3 |" in report
    for name in ("L4", "all-errors", "error-time", "error-count", "rare-events", "pca"):
        assert f"| {name} |" in report
    s = summary(res)
    assert s["cases"] == 3 and 0.0 <= s["events_f1"] <= 1.0


def test_speed_on_a_tiny_job(tmp_path):
    job = generate_large_job(tmp_path / "big", parse_size("3MB"), seed=1)
    rows = run_speed(job)
    assert {r["phase"] for r in rows} == {"grep -c", "parse-1core", "diagnose-1core", "diagnose-pool",
                                          "naive-drain3", "fold-1core"}
    assert all(r["mb_per_s"] > 0 for r in rows)
    assert "× naive Drain3" in format_speed(rows, 3_000_000)
