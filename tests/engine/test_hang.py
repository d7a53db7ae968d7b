import json
import os
import pickle
from importlib import resources

import jsonschema

from engine.diagnose import analyze, diagnose
from engine.ingest import discover
from engine.model import diagnosis_from_dict
from engine.parse import parse_jobs
from tests.helpers.fr_dumps import dump, healthy_until, write
from tests.helpers.jobs import make_job, write_rank

SCHEMA = json.loads(resources.files("engine").joinpath("data", "diagnosis.v1.schema.json").read_text())
WORLD = 8


def _hung_job(tmp_path, *, culprit: int = 5, layout: str = "flight_recorder"):
    """Every rank but `culprit` times out in a collective; node-000 is noisy with ECC errors, so the
    logs alone point elsewhere; the dumps show that `culprit` never reached collective 41."""
    job = make_job(tmp_path / "job", nodes=4, fault_node=None, iterations=40)
    for f in sorted(job.rglob("rank-*.log")):
        rank = int(f.stem.split("-")[1])
        lines = f.read_text().splitlines()
        if rank != culprit:
            lines.append(f"[rank{rank}]:[E0501 10:40:00.000000000 ProcessGroupNCCL.cpp:607] [Rank {rank}] "
                         "Watchdog caught collective operation timeout: "
                         "WorkNCCL(SeqNum=41, OpType=ALLREDUCE) ran for 600044 milliseconds "
                         "before timing out.")
        if rank in (0, 1):
            lines += [f"[rank{rank}]: NVRM: Xid (PCI:0000:3b:00): 48, pid={900 + i}, DBE (double bit "
                      "error)" for i in range(6)]
        write_rank(f, lines)
    for rank in range(WORLD):
        entries = healthy_until(40, pending=False) if rank == culprit else healthy_until(41)
        folder = job / "flight_recorder" if layout == "flight_recorder" else job / f"node-{rank // 2:03d}"
        write(folder, rank, dump(entries, world=WORLD))
    return job


def test_the_dumps_put_the_stuck_ranks_node_first(tmp_path):
    job = _hung_job(tmp_path)
    parsed = parse_jobs([job])[0]
    d = analyze(parsed)
    assert d.nodes[0].node == "node-002" and d.nodes[0].score >= 0.95
    assert d.hang.kind == "missing" and d.hang.ranks == [5] and d.hang.nodes == ["node-002"]
    assert d.hang.collective == "nccl:all_reduce" and d.hang.sequence_id == 41
    assert "rank 5 (node-002) never reached nccl:all_reduce #41" in d.hang.summary
    logs_only = analyze(parsed, hang_evidence=False)
    assert logs_only.hang is None and logs_only.nodes[0].node == "node-000"  # the noisy node
    jsonschema.validate(d.to_dict(), SCHEMA)
    assert diagnosis_from_dict(json.loads(json.dumps(d.to_dict()))).hang == d.hang


def test_dumps_in_node_folders_are_not_read_as_logs(tmp_path):
    job = _hung_job(tmp_path, layout="node")
    names = {os.path.basename(f.path) for f in discover(job).files}
    assert not any(n.startswith("nccl_trace") for n in names)
    assert diagnose(job).hang.nodes == ["node-002"]


def test_a_hostile_pickle_is_refused_in_one_line_and_the_rest_is_analysed(tmp_path):
    job = _hung_job(tmp_path)
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    (job / "flight_recorder" / "nccl_trace_rank_3").write_bytes(pickle.dumps({"entries": [Evil()]}))
    d = diagnose(job)
    assert not marker.exists()
    bad = [u for u in d.stats.unreadable_files if "nccl_trace_rank_3" in u]
    assert len(bad) == 1 and "refused" in bad[0] and "\n" not in bad[0]
    assert d.hang.ranks == [5] and d.nodes[0].node == "node-002"
    assert d.events  # the logs were analysed


def test_a_job_without_dumps_has_no_hang_section(tmp_path):
    job = make_job(tmp_path / "plain")
    d = diagnose(job)
    assert d.hang is None and "hang" not in d.to_dict()
