"""One fault report shown together (engine.reports through engine.events)."""
from engine.diagnose import diagnose
from engine.events import score_events
from engine.filter import candidate_events, normal_pool
from engine.known import KnownSignature
from engine.parse import parse_jobs
from engine.reports import report_groups
from tests.helpers.jobs import write_failed_job

WORKER = ("ERROR: Unexpected bus error encountered in worker. "
          "This might be caused by insufficient shared memory (shm).")
KILLED = "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error."
KNOWN = [KnownSignature("loader-killed",
                        (r"Unexpected bus error encountered in worker", r"DataLoader worker .* is killed"),
                        weight=0.9)]


def _console(tmp_path, lines, name="job"):
    return write_failed_job(tmp_path / name, {"node0/console.log": lines})


def _lines(gap: int) -> list[str]:
    return (["epoch 1 step 10 loss 2.3", WORKER] + [f"  progress line {k} of the loader" for k in range(gap)]
            + ["Traceback (most recent call last):", '  File "train.py", line 3, in <module>', KILLED])


def test_a_report_s_best_event_shows_its_lines_in_the_file_s_order(tmp_path):
    job = _console(tmp_path, _lines(2))
    d = diagnose(job, known=KNOWN)
    assert d.events[0].examples[:2] == [WORKER, KILLED]
    # the other line is still an event of its own
    assert len([e for e in d.events if e.known == "loader-killed"]) == 2


def test_lines_far_apart_or_without_a_library_are_not_grouped(tmp_path):
    far = diagnose(_console(tmp_path, _lines(30), "far"), known=KNOWN)
    assert all(len(e.examples) == 1 for e in far.events if e.known)
    plain = diagnose(_console(tmp_path, _lines(2), "plain"))
    assert all(len(e.examples) == 1 for e in plain.events)


def test_a_cascade_every_node_logs_is_not_grouped(tmp_path):
    lines = ["[E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout",
             "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out."]
    files = {f"node{n}/rank.log": lines for n in range(4)}
    job = write_failed_job(tmp_path / "everywhere", files)
    parsed = parse_jobs([job])[0]
    known = [KnownSignature("watchdog", (r"Watchdog caught", r"Some NCCL operations"), root=False)]
    cands = candidate_events(parsed, normal_pool([]))
    scored = score_events(parsed, cands, known=known)
    named = {e.id: e.known for e in scored if e.known}
    assert len(named) == 2
    assert report_groups(parsed, cands, named, {e.id: e.severity for e in scored}) == {}
