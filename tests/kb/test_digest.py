"""The digest of a seeded knowledge base (tests/helpers/digest_seed.py) has the known counts."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from kb import KbError, feedback
from kb.db import session
from kb.digest import compute_digest, slack_thread_link
from tests.helpers import digest_seed
from tests.helpers.digest_seed import DAY, NOW, _store


@pytest.fixture
def seeded(engine):
    with session(engine) as s:
        ids = digest_seed.seed(s)
    return engine, ids


def test_patterns_counts_trends_and_seen_range(seeded) -> None:
    engine, ids = seeded
    confirmed = digest_seed.confirmed_pattern_id(ids)
    with session(engine) as s:
        dg = compute_digest(s, days=7, now=NOW)
    assert (dg.diagnoses, dg.previous_diagnoses) == (9, 3)  # job-c and job-f were asked about twice
    assert (dg.jobs, dg.previous_jobs) == (7, 3)
    assert [(p.pattern_id, p.count, p.previous, p.trend) for p in dg.patterns] == [
        ("nic-link-down", 3, 1, "up"),
        ("xid-79-fallen-off-bus", 2, 2, "same"),
        (confirmed, 1, 0, "new"),
    ]  # disk-full was rejected (for job-f's first diagnosis, which covers its second): it does not count
    nic, xid, new = dg.patterns
    assert nic.jobs == ["job-c", "job-d", "job-g"] and xid.jobs == ["job-a", "job-b"]
    assert xid.first_seen == NOW - 30 * DAY and xid.last_seen == NOW - DAY  # job-late is after NOW
    assert nic.first_seen == NOW - 9 * DAY
    assert new.title == digest_seed.CONFIRMED_TITLE and new.category == "hardware/accelerator"
    assert xid.severity == "critical" and xid.title == "NVIDIA Xid 79: GPU has fallen off the bus"


def test_repeat_offenders_and_recommendations(seeded) -> None:
    engine, ids = seeded
    with session(engine) as s:
        dg = compute_digest(s, days=7, now=NOW)
    got = [(o.node, o.jobs, o.recommendation) for o in dg.offenders]
    assert got == [
        ("node-02", ["job-c", "job-d", "job-g"], "drain"),  # three failed jobs
        ("node-01", ["job-a", "job-b"], "drain"),  # a critical pattern (Xid 79)
        ("node-03", ["job-e", "job-f"], "inspect"),
    ]  # node-99 scored below 0.5; node-05 only in the previous window
    node01, node02, node03 = dg.offenders[1], dg.offenders[0], dg.offenders[2]
    assert "critical" in node01.reason and "3 failed jobs" in node02.reason
    assert node01.patterns == ["xid-79-fallen-off-bus"] and node01.max_score == pytest.approx(0.9)
    assert node03.patterns == [digest_seed.confirmed_pattern_id(ids)]  # the rejected match is gone
    assert dg.offenders_total == 3


def test_backlog_and_median_times(seeded) -> None:
    engine, ids = seeded
    with session(engine) as s:
        dg = compute_digest(s, days=7, now=NOW)
    assert (dg.backlog_total, dg.backlog_in_window) == (9, 5)  # jobs, not diagnoses
    assert [b.job_id for b in dg.backlog][:3] == ["job-o1", "job-p3", "job-p2"]  # oldest first
    jobs = [b.job_id for b in dg.backlog]
    assert len(jobs) == len(set(jobs)) and "job-f" not in jobs and "job-e" not in jobs
    (c,) = [b for b in dg.backlog if b.job_id == "job-c"]  # as its latest diagnosis
    assert c.diagnosis_id == ids["job-c#2"] and c.diagnosed_at == NOW - 3 * DAY + timedelta(hours=2)
    assert c.link == "https://slack.com/archives/C0DIGEST/p1760000000000300"
    (a,) = [b for b in dg.backlog if b.job_id == "job-a"]
    assert a.link == "https://slack.com/archives/C0DIGEST/p1760000000000100"
    assert a.diagnosis_id == ids["job-a"] and a.pattern_id == "xid-79-fallen-off-bus"
    assert dg.median_to_diagnosis == pytest.approx(900.0)  # 5, 10, 20, 30 minutes (per diagnosis)
    assert dg.confirmations == 1
    assert dg.median_to_confirmation == pytest.approx((digest_seed.CONFIRM_DELAY + timedelta(minutes=5))
                                                      .total_seconds())


def test_per_day_counts_and_json(seeded) -> None:
    engine, _ = seeded
    with session(engine) as s:
        dg = compute_digest(s, days=7, now=NOW)
    assert len(dg.day_starts) == 14 and dg.day_starts[0] == NOW - 14 * DAY
    xid = dg.pattern_days["xid-79-fallen-off-bus"]
    assert sum(xid) == 4 and xid[13] == 1 and xid[12] == 1  # job-a, job-b; job-p2, job-p3 before
    assert sum(dg.pattern_days["nic-link-down"]) == 4  # job-c once, on its latest diagnosis's day
    doc = json.loads(json.dumps(dg.to_dict()))
    assert doc["patterns"][0]["first_seen"].startswith("2026-06-06")


def test_windows_and_bad_days(seeded) -> None:
    engine, _ = seeded
    with session(engine) as s:
        one = compute_digest(s, days=1, now=NOW)
        empty = compute_digest(s, days=3, now=NOW + 400 * DAY)
        for bad in (0, 366, -1):
            with pytest.raises(KbError, match="from 1 to 365"):
                compute_digest(s, days=bad, now=NOW)
    assert one.diagnoses == 1 and one.previous_diagnoses == 1  # windows include their start
    assert [(p.pattern_id, p.count, p.previous, p.trend) for p in one.patterns] == [
        ("xid-79-fallen-off-bus", 1, 1, "same")]
    assert empty.diagnoses == 0 and not empty.patterns and not empty.offenders
    assert empty.median_to_diagnosis is None and empty.backlog_total == 10


def test_a_job_asked_about_four_times_counts_once(engine) -> None:
    with session(engine) as s:
        ids = [_store(s, "job-x", "nic-link-down", NOW - DAY + timedelta(minutes=k), {"node-02": 0.9},
                      channel="C0DIGEST" if k < 3 else None, ts=f"1760000000.00010{k}" if k < 3 else None)
               for k in range(4)]
        job_y = _store(s, "job-y", "nic-link-down", NOW - 2 * DAY, {"node-02": 0.8})
        _store(s, "job-x", "nic-link-down", NOW - 9 * DAY, {"node-02": 0.9})  # also in the week before
        s.commit()
        dg = compute_digest(s, days=7, now=NOW)
        assert (dg.diagnoses, dg.jobs, dg.previous_jobs) == (5, 2, 1)
        assert [(p.pattern_id, p.count, p.previous, p.trend, p.jobs) for p in dg.patterns] == [
            ("nic-link-down", 2, 1, "up", ["job-x", "job-y"])]
        assert sum(dg.pattern_days["nic-link-down"]) == 3
        (node,) = dg.offenders
        assert (node.node, node.jobs, node.patterns) == ("node-02", ["job-x", "job-y"], ["nic-link-down"])
        assert (dg.backlog_total, dg.backlog_in_window) == (2, 2)
        assert [(b.job_id, b.diagnosis_id) for b in dg.backlog] == [("job-y", job_y), ("job-x", ids[3])]
        # the latest diagnosis was not posted in Slack: the job links to its newest thread that was
        assert dg.backlog[1].link == "https://slack.com/archives/C0DIGEST/p1760000000000102"

        feedback.confirm_match(s, ids[1], "U0SRE")  # a verdict on any diagnosis handles the job
        s.commit()
        dg = compute_digest(s, days=7, now=NOW)
        assert [b.job_id for b in dg.backlog] == ["job-y"] and dg.backlog_total == 1
        assert dg.patterns[0].count == 2


def test_a_confirmation_wins_over_a_later_rematch_and_a_rejection_covers_the_job(engine) -> None:
    with session(engine) as s:
        first = _store(s, "job-x", "nic-link-down", NOW - 3 * DAY, {"node-02": 0.9})
        _store(s, "job-x", "disk-full", NOW - DAY, {"node-02": 0.9})  # re-asked, matched differently
        rejected = _store(s, "job-z", "disk-full", NOW - 3 * DAY, {"node-03": 0.9})
        _store(s, "job-z", "disk-full", NOW - DAY, {"node-03": 0.9})
        s.commit()
        feedback.confirm_match(s, first, "U0SRE")
        feedback.reject(s, rejected, "U0SRE", note="the disk was fine")
        s.commit()
        dg = compute_digest(s, days=7, now=NOW)
    assert [(p.pattern_id, p.count, p.jobs) for p in dg.patterns] == [("nic-link-down", 1, ["job-x"])]
    assert dg.backlog_total == 0 and dg.jobs == 2


def test_slack_thread_link() -> None:
    assert slack_thread_link("C1", "1700000001.000100") == "https://slack.com/archives/C1/p1700000001000100"
    assert slack_thread_link(None, "1.2") is None and slack_thread_link("C1", None) is None
