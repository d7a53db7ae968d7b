"""Node ranking signals that need no job folder."""
from engine.model import ClockNote, ParsedJob
from engine.spatial import _silence


def test_a_skewed_clock_is_corrected_before_silences_are_compared() -> None:
    # node-b's clock runs 8 h ahead: its last stamp looks like the latest, but it went quiet first
    parsed = ParsedJob(job_id="j", node_last_ts={"node-a": "2026-12-01T09:02:29.000000Z",
                                                 "node-b": "2026-12-01T17:01:29.000000Z",
                                                 "node-c": "2026-12-01T09:02:30.000000Z"})
    nodes = ["node-a", "node-b", "node-c"]
    raw = _silence(parsed, nodes)
    assert raw.argmax() != 1
    fixed = _silence(parsed, nodes, [ClockNote(kind="skew", node="node-b", seconds=28800.0, note="")])
    assert fixed.argmax() == 1 and fixed[1] == 1.0
