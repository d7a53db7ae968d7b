"""Node ranking signals that need no job folder."""
from engine.model import ClockNote, ParsedJob
from engine.spatial import _silence, zone_offsets


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


def _zoned_job(last: dict[str, str], shared: dict[str, list[str]]) -> ParsedJob:
    """Nodes whose naive stamps are in their own zones: `shared` gives each node's stamps of the same
    events (the launcher's start-up lines), `last` its last stamp."""
    return ParsedJob(job_id="j", node_last_ts=last,
                     node_first_seen={n: dict(enumerate(ts)) for n, ts in shared.items()})


def test_nodes_stamping_in_their_own_zones_are_put_on_one_timeline() -> None:
    # the same moment is 09:00 in New York, 15:00 in Berlin, 19:30 in Kolkata; node-ny stopped 60 s early
    parsed = _zoned_job({"node-ny": "2026-12-01T09:01:00.000000Z", "node-be": "2026-12-01T15:02:00.000000Z",
                         "node-in": "2026-12-01T19:32:00.000000Z"},
                        {"node-ny": ["2026-12-01T09:00:00.100000Z", "2026-12-01T09:00:01.000000Z"],
                         "node-be": ["2026-12-01T15:00:00.300000Z", "2026-12-01T15:00:01.200000Z"],
                         "node-in": ["2026-12-01T19:30:00.200000Z", "2026-12-01T19:30:01.100000Z"]})
    nodes = ["node-be", "node-in", "node-ny"]
    zones = zone_offsets(parsed, nodes)
    assert zones is not None and {n: zones[n] - zones["node-be"] for n in nodes} == \
        {"node-be": 0.0, "node-in": 16200.0, "node-ny": -21600.0}
    silence = _silence(parsed, nodes)
    assert silence.argmax() == 2 and silence[2] == 1.0 and silence[:2].max() == 0.0


def test_a_node_mixing_two_zones_gives_no_timeline() -> None:
    # node-b's files hold stamps with the offset and naive local ones: its events disagree by hours
    parsed = _zoned_job({"node-a": "2026-12-01T09:01:00.000000Z", "node-b": "2026-12-01T14:02:00.000000Z",
                         "node-c": "2026-12-01T09:02:00.000000Z"},
                        {"node-a": ["2026-12-01T09:00:00.000000Z", "2026-12-01T09:00:01.000000Z"],
                         "node-b": ["2026-12-01T09:00:00.500000Z", "2026-12-01T14:30:01.000000Z"],
                         "node-c": ["2026-12-01T09:00:00.200000Z", "2026-12-01T09:00:01.200000Z"]})
    nodes = ["node-a", "node-b", "node-c"]
    assert zone_offsets(parsed, nodes) is None
    assert _silence(parsed, nodes).max() == 0.0  # no stopped-first guess from an unplaceable clock
