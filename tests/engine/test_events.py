"""Cut-off last lines: the last words of a rank that died mid-line, unless they only start a routine line."""
import json
from pathlib import Path

from engine.diagnose import diagnose
from engine.events import crash_tails
from engine.parse import parse_jobs
from tests.helpers.jobs import write_rank


def _job(root: Path, *, last_line: str | None, error_on: int | None) -> Path:
    """8 nodes log start-up and 30 iterations; node 1 may log an error; node 5's file may end mid-line."""
    root.mkdir(parents=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for n in range(8):
        lines = [f"2024-05-01 10:00:0{k} INFO {m}" for k, m in enumerate(
            ["initializing torch distributed", "building train dataset", "Start training"])]
        lines += [f"2024-05-01 10:{it:02d}:10 INFO iteration {it}/ 100 | consumed samples: {it * 64} | "
                  f"lm loss: 2.{it:02d} | grad norm: 0.{it:02d} |" for it in range(1, 31)]
        if n == error_on:
            lines.append("2024-05-01 10:30:40 ERROR RuntimeError: CUDA error: an illegal memory access")
        cut = n == 5 and last_line is not None
        if cut:
            lines.append(last_line)
        write_rank(root / f"node-{n}" / "rank.log", lines, newline_at_end=not cut)
    return root


def test_a_routine_line_cut_off_is_not_an_event_of_its_own(tmp_path):
    job = _job(tmp_path / "job", last_line="2024-05-01 10:31:10 INFO iteration 31/ 100 | consumed samp",
               error_on=1)
    parsed = parse_jobs([job])[0]
    assert parsed.truncated_tails and crash_tails(parsed) == {}
    d = diagnose(job)
    assert "RuntimeError: CUDA error" in d.events[0].template
    assert not any("iteration" in e.template for e in d.events[:2])


def test_a_line_without_words_cut_off_is_not_an_event_either(tmp_path):
    job = _job(tmp_path / "job", last_line="2024-05-01 10:31:10 INFO 0x7f3a:", error_on=1)
    assert crash_tails(parse_jobs([job])[0]) == {}


def test_last_words_of_their_own_cut_off_still_point_to_the_rank_that_died(tmp_path):
    last = "2024-05-01 10:31:10 INFO NCCL watchdog aborting communicator on devi"
    job = _job(tmp_path / "job", last_line=last, error_on=None)
    parsed = parse_jobs([job])[0]
    assert list(crash_tails(parsed).values()) == [1]
    d = diagnose(job)
    assert "NCCL watchdog aborting" in d.events[0].template
    assert d.nodes[0].node == "node-5"


def test_a_crlf_file_shows_its_lines_without_the_carriage_return(tmp_path):
    job = tmp_path / "failed"
    job.mkdir()
    (job / "job.json").write_text(json.dumps({"job_id": "crlf", "status": "failed"}))
    (job / "node-0").mkdir()
    (job / "node-0" / "rank.log").write_bytes(
        b"2024-05-01 10:00:00 INFO start\r\n2024-05-01 10:00:01 ERROR RuntimeError: disk gone\r\n")
    d = diagnose(job)
    assert d.events and all(not x.endswith("\r") for e in d.events for x in e.examples)
    assert any("RuntimeError: disk gone" in x for e in d.events for x in e.examples)


def test_a_job_whose_events_all_stay_below_the_floor_still_shows_its_best_few():
    from engine.events import MIN_SCORE, ScoredEvent, select_events
    weak = [ScoredEvent(id=i, score=s, severity=s, cascade=False)
            for i, s in enumerate((0.3, 0.22, 0.21, 0.2))]
    shown = select_events(weak)
    assert [e.id for e in shown] == [0, 1, 2] and all(e.score < MIN_SCORE for e in shown)
    # however weak: a failed job has a cause, and the best line left after filtering may be it; but only
    # that one, not the lines tied with it
    assert [e.id for e in select_events([ScoredEvent(id=0, score=0.1, severity=0.1, cascade=False)])] == [0]
    faint = [ScoredEvent(id=0, score=0.12, severity=0.12, cascade=False),
             ScoredEvent(id=1, score=0.1, severity=0.1, cascade=False),
             ScoredEvent(id=2, score=0.1, severity=0.1, cascade=False)]
    assert [e.id for e in select_events(faint)] == [0]
    strong = [ScoredEvent(id=0, score=0.9, severity=0.9, cascade=False), *weak]
    assert [e.id for e in select_events(strong)] == [0]
