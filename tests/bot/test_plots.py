"""Plots of a real diagnosis and of edge cases: valid PNGs of the fixed size, right titles."""
from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from bot import plots
from engine.diagnose import diagnose
from engine.model import IterationSeries
from tests.helpers import png
from tests.helpers.jobs import make_job


@pytest.fixture(scope="module")
def diagnosis(tmp_path_factory):
    root = tmp_path_factory.mktemp("plots")
    job = make_job(root / "job-plot", nodes=4, fault_node=1, iterations=30, fault_at=25)
    ok = make_job(root / "ok", nodes=4, fault_node=None, status="succeeded")
    return diagnose(job, [ok])


def _check(data: bytes) -> dict[str, str]:
    assert png.size(data) == (plots.WIDTH, plots.HEIGHT)
    return png.text(data)


def test_diagnosis_pngs_from_dataclass_and_stored_json(diagnosis) -> None:
    got = plots.diagnosis_pngs(diagnosis)
    names = [n for n, _ in got]
    assert names == ["job-plot-node-scores.png", "job-plot-iterations.png", "job-plot-node-event-heatmap.png"]
    titles = [_check(b)["Title"] for _, b in got]
    assert titles[0] == "Node anomaly scores" and titles[1].startswith("Iteration similarity")
    stored = json.loads(json.dumps(diagnosis.to_dict(detail=True)))  # as kb/diagnoses.py keeps it
    assert [n for n, _ in plots.diagnosis_pngs(stored)] == names
    plain = diagnosis.to_dict()  # no "detail": node scores from "nodes" only
    assert [n for n, _ in plots.diagnosis_pngs(plain)] == ["job-plot-node-scores.png"]


def test_one_node_and_two_thousand_nodes() -> None:
    assert _check(plots.node_scores_png({"node-001": 0.9}))["Title"] == "Node anomaly scores"
    many = {f"node-{i:04d}": (i % 997) / 997 for i in range(2000)}
    started = time.perf_counter()
    title = _check(plots.node_scores_png(many))["Title"]
    assert title == f"Node anomaly scores (top {plots.TOP_NODES} of 2,000 nodes)"
    assert time.perf_counter() - started < 5
    assert "no node scores" in _check(plots.node_scores_png({}))["Title"]


def test_no_iterations_and_flagged_iterations() -> None:
    empty = IterationSeries(file="n1/rank-0.log", node="n1")
    assert "no training iterations" in _check(plots.iterations_png([empty]))["Title"]
    s = IterationSeries(file="/very/long/" + "x" * 200 + "/rank-0.log", node="n1",
                        iterations=list(range(1, 41)), distances=[1.0] * 39 + [9.0], mean=1.2, std=0.5,
                        threshold=2.7, flagged=[40])
    _check(plots.iterations_png([s, s, s]))
    assert plots.diagnosis_pngs({"job_id": "j", "nodes": [], "detail": {"iteration_series": [
        {"file": "f", "node": "n", "iterations": [], "distances": []}]}}) == []


def test_long_templates_and_odd_text_in_heatmap() -> None:
    events = ["RuntimeError: $x$ costs $5 \x1b[31m" + "very long template <*> " * 20, "🔥 unicode ✓ <*>"]
    data = plots.heatmap_png(["node-1", "node-2"], events, [[3, 0], [0, 120000]])
    assert _check(data)["Title"] == "Lines per node and event"
    label = plots.shorten(events[0])
    assert len(label.replace("\\", "")) == plots.LABEL_CHARS and label.endswith("…") and r"\$" in label
    assert "\x1b" not in label
    assert plots.shorten("/a/b/c/rank-0001.log", 12, keep_end=True) == "…nk-0001.log"
    wide = [[i % 7 for i in range(12)] for _ in range(12)]  # 144 cells: annotated
    _check(plots.heatmap_png([f"n{i}" for i in range(12)], [f"e{i} <*>" for i in range(12)], wide))


def test_pattern_counts() -> None:
    start = datetime(2026, 6, 1, 12, tzinfo=UTC)
    days = [start + timedelta(days=i) for i in range(14)]
    data = plots.pattern_counts_png(days, {"xid-79": [0, 1] * 7, "nic-link-down": [2] * 14},
                                    {"xid-79": "NVIDIA Xid 79: GPU has fallen off the bus"},
                                    window_start=days[7])
    assert _check(data)["Title"] == "Fault patterns per day"
    assert "no fault patterns" in _check(plots.pattern_counts_png(days, {}))["Title"]
