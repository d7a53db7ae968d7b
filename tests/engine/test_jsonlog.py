"""Structured lines end to end: a job whose faulty rank writes journald JSON (engine/jsonlog.py)."""
import json
from datetime import UTC, datetime

from engine.diagnose import diagnose
from engine.jsonlog import read
from engine.parse import parse_job
from tests.helpers.jobs import journald_lines, make_job, prose_lines, training_lines, write_rank

FAULT = "CUDA error: uncorrectable ECC error encountered"  # no "Error:" word: the level is PRIORITY's


def _journald_job(tmp_path):
    job = make_job(tmp_path / "failed", nodes=4, fault_node=2, fault_lines=())
    for rank in (4, 5):  # node-002's ranks: the journal of their output, then the fault at 10:30
        path = job / "node-002" / f"rank-{rank:04d}.log"
        path.unlink()
        lines = journald_lines(training_lines(rank, 20), datetime(2026, 5, 1, 10, 0, tzinfo=UTC), step=7.0)
        lines += journald_lines([FAULT], datetime(2026, 5, 1, 10, 30, rank, tzinfo=UTC), priority=3)
        write_rank(job / "node-002" / f"rank-{rank:04d}.json", lines)
    return job


def test_a_journald_rank_gives_the_first_event_its_stamp_and_level(tmp_path):
    job = _journald_job(tmp_path)
    hist = make_job(tmp_path / "ok", nodes=2, fault_node=None, status="succeeded")
    d = diagnose(job, [hist])
    top = d.events[0]
    assert top.template == FAULT and top.level == "ERROR"
    assert top.first_seen == "2026-05-01T10:30:04Z"  # rank 4's record, before rank 5's
    assert json.loads(top.examples[0])["MESSAGE"] == FAULT  # examples stay the raw lines
    assert d.nodes[0].node == "node-002"
    stamps = {t.template: t.first_seen for t in parse_job(job).templates}
    watchdog = next(ts for t, ts in stamps.items() if "Watchdog" in t)
    assert stamps[FAULT] < watchdog  # the journal's stamps order the fault before the cascade


def test_journald_records_template_their_message_not_the_fields(tmp_path):
    parsed = parse_job(_journald_job(tmp_path))
    templates = [t.template for t in parsed.templates]
    assert not any("MESSAGE" in t or "__REALTIME" in t for t in templates)
    timer = parsed.templates[templates.index("[timers] forward-backward: <*>.<*> ms")]  # its header read too
    assert set(timer.nodes) == {"node-000", "node-001", "node-002", "node-003"}  # one event, text or JSON
    assert all(parsed.iterations[str(f)].max_iteration() == 21 for f in parsed.iterations)  # markers read too
    assert parsed.node_last_ts["node-002"] == "2026-05-01T10:30:05.000000Z"  # the node that stopped first


def test_structured_free_text_keeps_the_words_its_messages_share(tmp_path):
    lines = [json.dumps({"event": "Sample: " + p, "level": "info",
                         "timestamp": f"2026-05-01T10:00:{i % 60:02d}Z"})
             for i, p in enumerate(prose_lines(6000))]  # generated text: nothing repeats (engine/freetext.py)
    write_rank(tmp_path / "j" / "node-000" / "rank-0.log", lines)
    parsed = parse_job(tmp_path / "j")
    assert parsed.stats.free_text_lines > 4000
    assert max(parsed.templates, key=lambda t: t.count).template == "Sample: <*>"


def test_read_leaves_text_and_objects_without_a_message_alone():
    assert read("plain text") is None and read('{"loss": 0.5}') is None
    rec = read('{"msg": "x", "level": 40, "time": 1795842821000}')
    assert rec is not None and (rec.message, rec.level, rec.time) == ("x", "WARN", ("epoch", 1795842821.0))
