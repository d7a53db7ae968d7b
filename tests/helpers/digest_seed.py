"""A knowledge base seeded with diagnoses, node incidents and feedback of known counts, built
through the kb service functions (``kb.diagnoses.store``, ``kb.feedback.confirm/reject``).

Timeline (``NOW`` = 2026-06-15 12:00 UTC, 7-day window [06-08 12:00, 06-15 12:00)):

=========  ====================  =======================  ============================  ==============
job        diagnosed             matched pattern          nodes (score)                 feedback
=========  ====================  =======================  ============================  ==============
job-a      NOW - 1 d             xid-79-fallen-off-bus    node-01 .9, node-99 .3        (Slack C0DIGEST)
job-b      NOW - 2 d             xid-79-fallen-off-bus    node-01 .8
job-c      NOW - 3 d             nic-link-down            node-02 .7
job-c      NOW - 3 d + 2 h       nic-link-down            node-02 .7                    (re-asked, C0DIGEST)
job-d      NOW - 4 d             nic-link-down            node-02 .6
job-g      NOW - 5 d 1 h         nic-link-down            node-02 .95
job-e      NOW - 5 d             (analyzed)               node-03 .9                    confirmed: new
job-f      NOW - 2 d 3 h         disk-full                node-03 .7                    rejected
job-f      NOW - 2 d 1 h         disk-full                node-03 .7                    (re-asked)
job-p1     NOW - 9 d             nic-link-down            node-02 .9
job-p2     NOW - 10 d            xid-79-fallen-off-bus    node-05 .9
job-p3     NOW - 12 d            xid-79-fallen-off-bus    node-05 .9
job-o1     NOW - 30 d            xid-79-fallen-off-bus    node-01 .9
job-late   NOW + 1 d             xid-79-fallen-off-bus    node-01 .9                    after NOW
=========  ====================  =======================  ============================  ==============

Two jobs were asked about twice (``REASKED``): they count once, job-c in the backlog as its latest
diagnosis, and job-f's rejection covers its second diagnosis too.
"""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlmodel import Session

from engine.model import Diagnosis, Match, NodeFinding
from kb import diagnoses, feedback

NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
DAY = timedelta(days=1)
CONFIRMED_TITLE = "HBM page retirement storm"
REASKED = ("job-c", "job-f")
CONFIRM_DELAY = timedelta(days=1)  # job-e confirmed one day after it was diagnosed (+5 min wait)

_TITLES = {"xid-79-fallen-off-bus": ("GPU has fallen off the bus", "hardware/accelerator"),
           "nic-link-down": ("NIC link down", "hardware/network"),
           "disk-full": ("Disk full", "hardware/storage")}


def _diagnosis(job: str, pattern: str | None, nodes: dict[str, float]) -> Diagnosis:
    d = Diagnosis(job_id=job, status="matched" if pattern else "analyzed",
                  nodes=[NodeFinding(node=n, score=s, events=["RuntimeError <*>"]) for n, s in nodes.items()])
    if pattern:
        title, cat = _TITLES[pattern]
        d.matches = [Match(pattern_id=pattern, title=title, category=cat)]
    return d


def _store(s: Session, job: str, pattern: str | None, when: datetime, nodes: dict[str, float], *,
           wait: timedelta | None = None, channel: str | None = None, ts: str | None = None) -> int:
    return diagnoses.store(s, _diagnosis(job, pattern, nodes), {"model": "toy"}, diagnosed_at=when,
                           requested_at=when - wait if wait else None, slack_channel=channel,
                           slack_thread_ts=ts)


def seed(s: Session, now: datetime = NOW) -> dict[str, int]:
    """Seed the table above (times relative to ``now``); returns job id → diagnosis id (the first
    diagnosis of a re-asked job; its second is under ``<job>#2``). Commits."""
    ids = {
        "job-a": _store(s, "job-a", "xid-79-fallen-off-bus", now - DAY, {"node-01": 0.9, "node-99": 0.3},
                        wait=timedelta(minutes=10), channel="C0DIGEST", ts="1760000000.000100"),
        "job-b": _store(s, "job-b", "xid-79-fallen-off-bus", now - 2 * DAY, {"node-01": 0.8},
                        wait=timedelta(minutes=20)),
        "job-c": _store(s, "job-c", "nic-link-down", now - 3 * DAY, {"node-02": 0.7},
                        wait=timedelta(minutes=30)),
        "job-d": _store(s, "job-d", "nic-link-down", now - 4 * DAY, {"node-02": 0.6}),
        "job-g": _store(s, "job-g", "nic-link-down", now - 5 * DAY - timedelta(hours=1), {"node-02": 0.95}),
        "job-e": _store(s, "job-e", None, now - 5 * DAY, {"node-03": 0.9}, wait=timedelta(minutes=5)),
        "job-f": _store(s, "job-f", "disk-full", now - 2 * DAY - timedelta(hours=3), {"node-03": 0.7}),
        "job-p1": _store(s, "job-p1", "nic-link-down", now - 9 * DAY, {"node-02": 0.9}),
        "job-p2": _store(s, "job-p2", "xid-79-fallen-off-bus", now - 10 * DAY, {"node-05": 0.9}),
        "job-p3": _store(s, "job-p3", "xid-79-fallen-off-bus", now - 12 * DAY, {"node-05": 0.9}),
        "job-o1": _store(s, "job-o1", "xid-79-fallen-off-bus", now - 30 * DAY, {"node-01": 0.9}),
        "job-late": _store(s, "job-late", "xid-79-fallen-off-bus", now + DAY, {"node-01": 0.9}),
    }
    ids["job-c#2"] = _store(s, "job-c", "nic-link-down", now - 3 * DAY + timedelta(hours=2), {"node-02": 0.7},
                            channel="C0DIGEST", ts="1760000000.000300")
    ids["job-f#2"] = _store(s, "job-f", "disk-full", now - 2 * DAY - timedelta(hours=1), {"node-03": 0.7})
    pattern = feedback.confirm(s, ids["job-e"], events=["HBM page retirement count <*> exceeds <*>"],
                               title=CONFIRMED_TITLE, category="hardware/accelerator",
                               remediation="Drain the node and ask the vendor to replace the GPU.",
                               user="U0SRE", severity="high")
    fb = feedback.feedback_for(s, diagnosis_id=ids["job-e"])[0]
    fb.created_at = now - 5 * DAY + CONFIRM_DELAY
    s.add(fb)
    rej = feedback.reject(s, ids["job-f"], "U0SRE", note="the disk was fine")
    rej.created_at = now - 2 * DAY
    s.add(rej)
    s.commit()
    ids["pattern:" + pattern.id] = 0
    return ids


def confirmed_pattern_id(ids: dict[str, int]) -> str:
    return next(k.split(":", 1)[1] for k in ids if k.startswith("pattern:"))


def seeded_database(path: Path, now: datetime | None = None) -> str:
    """A SQLite knowledge base at `path`, seeded as `seed` does (relative to `now`, default: now).
    Returns its URL."""
    from kb.db import open_db, session
    from kb.models import utcnow

    url = f"sqlite:///{path}"
    engine = open_db(url)
    with session(engine) as s:
        seed(s, now=now or utcnow())
    engine.dispose()
    return url
