import json
from importlib import resources
from pathlib import Path

import jsonschema

from engine.diagnose import diagnose
from engine.executors import InProcessExecutor, PoolExecutor
from engine.model import AnalysisDetail
from engine.parse import parse_job
from tests.helpers.jobs import make_job

SCHEMA = json.loads(resources.files("engine").joinpath("data", "diagnosis.v1.schema.json").read_text())


def test_root_cause_outranks_cascade_and_names_the_node(tmp_path):
    job = make_job(tmp_path / "failed", nodes=6, fault_node=3)
    hist = make_job(tmp_path / "ok", nodes=2, fault_node=None, status="succeeded")
    d = diagnose(job, [hist])
    jsonschema.validate(d.to_dict(), SCHEMA)
    assert d.events[0].template == "RuntimeError: CUDA error: uncorrectable ECC error encountered"
    assert d.events[0].examples == ["RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    assert d.nodes[0].node == "node-003"
    assert d.stage == "training"
    # the failing rank's iteration lines run up to the failure: the job's own timeline places it
    assert d.stage_basis is not None and d.stage_basis.source == "timeline"
    assert d.to_dict()["stage_basis"] == {"source": "timeline"}
    assert d.iterations and d.iterations[0].iteration == 21
    assert all("Watchdog" not in e.template for e in d.events[:1])


def test_history_filters_normal_events(tmp_path):
    job = make_job(tmp_path / "failed", nodes=3, fault_node=1)
    hist = make_job(tmp_path / "ok", nodes=2, fault_node=None, status="succeeded")
    with_hist = diagnose(job, [hist])
    templates = {e.template for e in with_hist.events}
    assert not any("iteration" in t for t in templates)


def test_pool_and_in_process_agree(tmp_path):
    job = make_job(tmp_path / "failed", nodes=3, fault_node=1)
    a = parse_job(job, executor=InProcessExecutor())
    b = parse_job(job, executor=PoolExecutor(2))
    assert [t.template for t in a.templates] == [t.template for t in b.templates]
    assert a.node_counts == b.node_counts


def test_bad_files_are_reported_not_fatal(tmp_path):
    job = make_job(tmp_path / "failed", nodes=3, fault_node=1)
    (job / "node-000" / "broken.log.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    (job / "node-000" / "binary.log").write_bytes(bytes(range(256)) * 64)
    (job / "node-000" / "huge.log").write_bytes(b"x" * (10 * 1024 * 1024))
    d = diagnose(job)
    assert any("broken.log.gz" in f for f in d.stats.unreadable_files)
    assert d.stats.long_lines_cut >= 1
    jsonschema.validate(d.to_dict(), SCHEMA)
    assert d.nodes[0].node == "node-001"


def test_detail_carries_plot_data_but_stays_out_of_the_contract_json(tmp_path: Path) -> None:
    job = make_job(tmp_path / "job-1")
    hist = make_job(tmp_path / "ok", status="succeeded", fault_node=None)
    d = diagnose(job, [hist])
    assert "detail" not in d.to_dict()
    detail = d.to_dict(detail=True)["detail"]
    assert set(detail["node_scores"]) == {"node-000", "node-001", "node-002", "node-003"}
    assert detail["heatmap_nodes"][0] == "node-002"
    assert len(detail["heatmap_counts"]) == len(detail["heatmap_nodes"])
    assert all(len(row) == len(detail["heatmap_events"]) for row in detail["heatmap_counts"])
    series = detail["iteration_series"]
    assert series and all(s["threshold"] >= s["mean"] for s in series)
    assert any(s["flagged"] for s in series)
    assert AnalysisDetail.from_dict(detail) == d.detail
