"""Precursors: a node's quiet system-log line before the job's first error ranks as the root."""
from pathlib import Path

from engine.diagnose import diagnose
from engine.events import score_events
from engine.filter import candidate_events, normal_pool
from engine.parse import parse_jobs
from tests.helpers.jobs import make_job, write_system_log

BOOT = "[ 2028355.003817] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. Quota mode: none."
NFS = "[2054426.283194] nfs: server 10.40.0.12 not responding, still trying"


def _jobs(tmp: Path, *, quiet: list[str], node: int = 2, nodes: int = 4) -> tuple[Path, Path]:
    """A failed job whose node `node` stops writing (no error line of its own) while the others log
    watchdog timeouts, its system log saying `quiet`; a succeeded history job of the same shape."""
    failed = make_job(tmp / "failed", nodes=nodes, fault_node=node, fault_lines=())
    history = make_job(tmp / "history", nodes=nodes, fault_node=None, status="succeeded")
    for n in range(nodes):
        write_system_log(history, n, [BOOT])
        write_system_log(failed, n, [BOOT, *(quiet if n == node else [])])
    return failed, history


def test_a_quiet_kernel_line_of_the_silent_node_is_reported_first(tmp_path):
    failed, history = _jobs(tmp_path, quiet=[NFS])
    d = diagnose(failed, [history])
    assert d.events[0].template.startswith("nfs: server") and d.events[0].nodes == ["node-002"]
    assert d.events[0].known is None  # no library: the job's own evidence
    assert d.nodes[0].node == "node-002"


def test_without_history_every_line_is_new_and_nothing_is_lifted(tmp_path):
    failed, _ = _jobs(tmp_path, quiet=[NFS])
    d = diagnose(failed)
    assert not d.events[0].template.startswith("nfs: server")


def test_the_first_new_line_of_the_system_log_weighs_most(tmp_path):
    after = "[2054556.283194] INFO: task python3:1931737 blocked for more than 122 seconds."
    failed, history = _jobs(tmp_path, quiet=[NFS, after])
    parsed = parse_jobs([failed, history])
    candidates = candidate_events(parsed[0], normal_pool(parsed[1:]))
    events = score_events(parsed[0], candidates, history=True)
    scored = {parsed[0].templates[e.id].template: e for e in events}
    nfs = next(e for t, e in scored.items() if t.startswith("nfs: server"))
    task = next(e for t, e in scored.items() if "blocked for more than" in t)
    assert nfs.severity > task.severity > 0.1


def test_a_line_on_most_nodes_is_no_precursor(tmp_path):
    failed, history = _jobs(tmp_path, quiet=[], nodes=4)
    for n in range(4):
        write_system_log(failed, n, [BOOT, NFS])
    d = diagnose(failed, [history])
    assert not any(e.template.startswith("nfs: server") and e.score >= 0.6 for e in d.events)


def test_a_system_line_after_the_first_error_is_not_lifted(tmp_path):
    late = "2026-05-01T11:30:00Z kernel: nfs: server 10.40.0.12 not responding, still trying"
    failed, history = _jobs(tmp_path, quiet=[])
    write_system_log(failed, 2, [late], name="journal.log")
    write_system_log(history, 2, ["2026-05-01T09:00:00Z kernel: EXT4-fs (nvme0n1p2): mounted filesystem"],
                     name="journal.log")
    d = diagnose(failed, [history])
    assert not d.events or not d.events[0].template.startswith("nfs: server")
