"""The last words of a job that went quiet: shown after its best lines when no line raises an alarm."""
import json
from pathlib import Path

from engine.diagnose import diagnose
from engine.lastwords import last_words
from engine.parse import parse_jobs
from tests.helpers.jobs import write_rank


def _job(root: Path, *, ending: dict[int, str], error: str | None = None) -> Path:
    """4 nodes log start-up and 20 iterations, then each node in `ending` one last line of its own."""
    root.mkdir(parents=True)
    (root / "job.json").write_text(json.dumps({"job_id": root.name, "status": "failed"}))
    for n in range(4):
        lines = ["2024-05-01 10:00:00 INFO initializing torch distributed",
                 "2024-05-01 10:00:01 INFO Start training"]
        lines += [f"2024-05-01 10:{it:02d}:10 INFO iteration {it}/ 20 | lm loss: 2.{it:02d} |"
                  for it in range(1, 21)]
        if error and n == 2:
            lines.append(f"2024-05-01 10:20:30 ERROR {error}")
        if n in ending:
            lines.append(f"2024-05-01 10:20:40 INFO {ending[n]}")
        write_rank(root / f"node-{n}" / "rank.log", lines)
    return root


def test_the_line_fewest_ranks_end_with_is_the_last_word(tmp_path):
    job = _job(tmp_path / "job", ending={1: "[after training is done] datetime: 2024-05-01 10:20:40"})
    parsed = parse_jobs([job])[0]
    (i,) = last_words(parsed, range(len(parsed.templates)))
    assert "after training is done" in parsed.templates[i].template


def test_a_quiet_job_shows_where_its_ranks_stopped(tmp_path):
    d = diagnose(_job(tmp_path / "job", ending={1: "[after training is done] datetime: 2024-05-01 10:20:40"}))
    assert any("after training is done" in e.template for e in d.events[:3])


def test_the_last_words_follow_the_best_line_never_above_it(tmp_path):
    job = _job(tmp_path / "job", ending={3: "[after training is done] datetime: 2024-05-01 10:20:40"})
    rank = job / "node-1" / "rank.log"
    lines = rank.read_text().splitlines()
    lines.insert(10, "2024-05-01 10:09:30 WARNING slow rank: step took 3x the median")
    write_rank(rank, lines)
    events = diagnose(job).events
    words = [k for k, e in enumerate(events) if "after training is done" in e.template]
    assert "slow rank" in events[0].template and words and words[0] > 0


def test_an_alarm_in_sight_keeps_the_last_words_out(tmp_path):
    d = diagnose(_job(tmp_path / "job", ending={1: "[after training is done] datetime: 2024-05-01 10:20:40"},
                      error="RuntimeError: CUDA error: an illegal memory access was encountered"))
    assert "illegal memory access" in d.events[0].template
    assert not any("after training is done" in e.template for e in d.events)


def test_a_line_without_a_word_is_no_last_word(tmp_path):
    job = _job(tmp_path / "job", ending={1: "----"})
    parsed = parse_jobs([job])[0]
    assert all("----" not in parsed.templates[i].template
               for i in last_words(parsed, range(len(parsed.templates))))
