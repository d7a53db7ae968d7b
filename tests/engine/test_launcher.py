import json

from engine.diagnose import diagnose
from engine.launcher import first_failures
from engine.parse import parse_job
from tests.helpers.jobs import write_rank


def _block(host: str, rank: int, exitcode: str, traceback: str) -> list[str]:
    return [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2026-12-01_16:59:49",
        f"  host      : {host}",
        f"  rank      : {rank} (local_rank: 0)",
        f"  exitcode  : {exitcode}",
        "  error_file: <N/A>",
        f"  traceback : {traceback}",
        "============================================================",
    ]


def _job(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "job.json").write_text(json.dumps({"job_id": "j", "status": "failed"}))
    for n in range(4):
        its = [f"[default0]:step {i} loss 2.{i}" for i in range(1, 8)]
        if n == 1:
            agent = _block("node-1", 2, "-9 (pid: 1164)  (SIGKILL)",
                           "Signal 9 (SIGKILL) received by PID 1164")
        else:
            its.append("[default0]:RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer "
                       "[127.0.0.1]:4242 This is typically caused by a remote worker crashing")
            agent = _block(f"node-{n}", 2 * n, "1 (pid: 1160)", "To enable traceback see: https://pytorch.org")
        agent.insert(0, "E1201 16:59:49.335000 1088 torch/distributed/elastic/multiprocessing/api.py:1002] "
                        f"failed (exitcode: {-9 if n == 1 else 1}) local_rank: 0 (pid: 1164) of binary: py")
        write_rank(root / f"node-{n}" / "torchrun.log", its + agent)
    return root


def test_blocks_are_read_and_the_killed_rank_comes_first(tmp_path):
    blocks = first_failures(parse_job(_job(tmp_path / "j")))
    assert len(blocks) == 4
    first = blocks[0]
    assert (first.node, first.signal, first.exitcode, first.killed) == ("node-1", "SIGKILL", -9, True)
    assert not any(b.killed for b in blocks[1:])


def test_a_rank_killed_first_is_the_root_cause_and_its_node_the_suspect(tmp_path):
    d = diagnose(_job(tmp_path / "j"))
    assert "  exitcode  : -9 (pid: 1164)  (SIGKILL)" in d.events[0].examples + d.events[1].examples \
        or "  traceback : Signal 9 (SIGKILL) received by PID 1164" in d.events[0].examples
    assert not d.events[0].template.startswith("RuntimeError")
    assert d.nodes[0].node == "node-1"


def test_the_killed_ranks_block_lines_point_at_its_node_alone(tmp_path):
    from engine.events import score_events
    from engine.filter import candidate_events, normal_pool

    parsed = parse_job(_job(tmp_path / "j"))
    scored = score_events(parsed, candidate_events(parsed, normal_pool([], ())))
    reports = [e for e in scored if e.evidence]
    assert reports and all(e.evidence_nodes == ("node-1",) for e in reports)


def test_a_template_of_wildcards_alone_fits_no_block_line():
    from engine.roles import _fits

    assert not _fits("<*>", "exitcode  : -9 (pid: 1164)  (SIGKILL)")
    assert _fits("exitcode : -<*> (pid: <*>) <*>", "exitcode  : -9 (pid: 1164)  (SIGKILL)")
