"""The recurring-fault digest: what kept coming back in a window of days, compared with the window
before it. Pure reads of the knowledge base; rules in ``kb/data/digest.yaml``.

Counts are of failed jobs, not diagnoses: a job asked about several times (in several threads, or
again after it finished) counts once per window. A job counts for a fault pattern when an SRE
confirmed one of its diagnoses of the window as that pattern (the newest confirmation wins), or else
when its latest diagnosis of the window matched the pattern and nobody rejected that pattern for
one of the job's diagnoses (or rejected that latest diagnosis). A diagnosis's time is when it was
diagnosed (``diagnosed_at``, else ``created_at``); a job's is its latest diagnosis's. The backlog
lists each job once (its latest diagnosis) while no diagnosis of the job has an SRE's verdict. The
median request→diagnosis time is over the window's diagnoses.
"""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any

import yaml
from sqlalchemy import and_, func, or_
from sqlmodel import Session, select

from kb import KbError
from kb.models import DiagnosisRecord, FaultPattern, Feedback, NodeIncident, utcnow

MAX_DAYS = 365
_CHUNK = 500  # ids per IN (...) list


@dataclass
class PatternTrend:
    pattern_id: str
    title: str
    category: str
    severity: str
    count: int  # distinct jobs in the window
    previous: int  # distinct jobs in the previous window
    trend: str  # new | up | down | same
    first_seen: datetime | None  # earliest diagnosis ever counted for the pattern
    last_seen: datetime | None  # latest one (up to the end of the window)
    jobs: list[str] = field(default_factory=list)  # distinct jobs affected in the window


@dataclass
class NodeOffender:
    node: str
    jobs: list[str]  # distinct failed jobs in the window that implicated the node
    incidents: int
    max_score: float
    last_seen: datetime
    patterns: list[str] = field(default_factory=list)  # pattern ids, in most jobs first
    recommendation: str = "inspect"  # drain | inspect
    reason: str = ""


@dataclass
class BacklogItem:  # one job no SRE has given a verdict on, as its latest diagnosis
    diagnosis_id: int
    job_id: str
    status: str
    diagnosed_at: datetime
    pattern_id: str | None = None
    slack_channel: str | None = None
    slack_thread_ts: str | None = None
    link: str | None = None  # the Slack thread, when the diagnosis was posted there


@dataclass
class Digest:
    days: int
    start: datetime  # window: [start, end)
    end: datetime
    previous_start: datetime  # previous window: [previous_start, start)
    diagnoses: int = 0
    previous_diagnoses: int = 0
    patterns: list[PatternTrend] = field(default_factory=list)
    patterns_total: int = 0
    offenders: list[NodeOffender] = field(default_factory=list)
    offenders_total: int = 0
    offender_min_jobs: int = 2  # the rule that made them offenders (kb/data/digest.yaml)
    backlog: list[BacklogItem] = field(default_factory=list)
    backlog_total: int = 0  # jobs
    backlog_in_window: int = 0  # of them, jobs whose latest diagnosis is in the window
    confirmations: int = 0  # confirmations made in the window
    median_to_diagnosis: float | None = None  # seconds, request → diagnosis (window's diagnoses)
    median_to_confirmation: float | None = None  # seconds, request → confirmation (window's confirmations)
    # per-day counts over both windows (24-hour bins ending at `end`), for the top patterns
    day_starts: list[datetime] = field(default_factory=list)
    pattern_days: dict[str, list[int]] = field(default_factory=dict)  # jobs, on their latest diagnosis's day
    jobs: int = 0  # distinct jobs diagnosed in the window
    previous_jobs: int = 0  # in the previous window

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (datetimes as ISO-8601 strings)."""
        return _jsonable(asdict(self))


@dataclass(frozen=True)
class DigestRules:
    repeat_offender_min_jobs: int = 2
    drain_min_jobs: int = 3
    drain_severities: frozenset[str] = frozenset({"critical"})
    drain_categories: frozenset[str] = frozenset()
    max_patterns: int = 10
    max_offenders: int = 10
    max_backlog: int = 10
    plotted_patterns: int = 6


@cache
def load_rules() -> DigestRules:
    """The rules of ``kb/data/digest.yaml``."""
    text = resources.files("kb").joinpath("data").joinpath("digest.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text) or {}
    drain = doc.get("drain") or {}
    limits = doc.get("limits") or {}
    try:
        rules = DigestRules(
            repeat_offender_min_jobs=int(doc.get("repeat_offender_min_jobs", 2)),
            drain_min_jobs=int(drain.get("min_jobs", 3)),
            drain_severities=frozenset(drain.get("severities") or ()),
            drain_categories=frozenset(drain.get("categories") or ()),
            max_patterns=int(limits.get("patterns", 10)), max_offenders=int(limits.get("offenders", 10)),
            max_backlog=int(limits.get("backlog", 10)),
            plotted_patterns=int(limits.get("plotted_patterns", 6)))
    except (TypeError, ValueError) as exc:
        raise KbError(f"kb/data/digest.yaml: {exc}") from None
    return rules


def slack_thread_link(channel: str | None, thread_ts: str | None) -> str | None:
    """``https://slack.com/archives/<channel>/p<ts without the dot>``, or None."""
    if not channel or not thread_ts:
        return None
    return f"https://slack.com/archives/{channel}/p{thread_ts.replace('.', '')}"


def compute_digest(session: Session, *, days: int = 7, now: datetime | None = None,
                   rules: DigestRules | None = None) -> Digest:
    """The digest of the ``days`` days before ``now`` (default: the current time), compared with
    the ``days`` days before those."""
    if not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise KbError(f"days must be a whole number from 1 to {MAX_DAYS}")
    rules = rules or load_rules()
    end = _aware(now) if now is not None else utcnow()
    start = end - timedelta(days=days)
    prev_start = start - timedelta(days=days)
    dg = Digest(days=days, start=start, end=end, previous_start=prev_start,
                offender_min_jobs=rules.repeat_offender_min_jobs)

    rows = _rows(session, and_(_when() >= prev_start, _when() < end))
    verdicts = _verdicts(session, rows)
    current = [r for r in rows if r.time >= start]
    previous = [r for r in rows if r.time < start]
    dg.diagnoses, dg.previous_diagnoses = len(current), len(previous)
    now_jobs, prev_jobs = _jobs(current, verdicts), _jobs(previous, verdicts)
    dg.jobs, dg.previous_jobs = len(now_jobs), len(prev_jobs)

    _fill_patterns(session, dg, now_jobs, prev_jobs, rules)
    _fill_offenders(session, dg, now_jobs, rules)
    _fill_backlog(session, dg, rules)
    _fill_times(session, dg, current)
    _fill_days(dg, [*now_jobs.values(), *prev_jobs.values()], rules)
    return dg


# ---- internals --------------------------------------------------------------------------------

@dataclass
class _Row:
    id: int
    job_id: str
    status: str
    matched: str | None
    time: datetime
    requested_at: datetime | None
    channel: str | None
    thread_ts: str | None


def _when():  # noqa: ANN202  (a SQL expression)
    return func.coalesce(DiagnosisRecord.diagnosed_at, DiagnosisRecord.created_at)


def _aware(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _rows(session: Session, where: Any) -> list[_Row]:
    D = DiagnosisRecord
    stmt = (select(D.id, D.job_id, D.status, D.matched_pattern_id, D.diagnosed_at, D.created_at,
                   D.requested_at, D.slack_channel, D.slack_thread_ts).where(where))
    return [_Row(id=i, job_id=j, status=s, matched=m, time=_aware(dt or ct),
                 requested_at=_aware(rq) if rq else None, channel=ch, thread_ts=ts)
            for i, j, s, m, dt, ct, rq, ch, ts in session.exec(stmt)]


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i:i + _CHUNK]


def _feedback(session: Session, ids: Sequence[int]) -> list[Feedback]:
    out: list[Feedback] = []
    for part in _chunks(list(ids)):
        out.extend(session.exec(select(Feedback).where(Feedback.diagnosis_id.in_(part))))
    return out


@dataclass
class _Verdicts:
    confirmed: dict[int, tuple[datetime, int, str]]  # diagnosis id → newest (time, id, pattern)
    rejected: set[tuple[int, str | None]]  # (diagnosis id, pattern id or None)


@dataclass
class _Job:
    """One job in one window: its diagnoses there, the latest of them, the pattern it counts for."""
    job_id: str
    rows: list[_Row]
    latest: _Row
    pattern: str | None


def _verdicts(session: Session, rows: Sequence[_Row]) -> _Verdicts:
    v = _Verdicts(confirmed={}, rejected=set())
    for fb in _feedback(session, [r.id for r in rows]):
        if fb.verdict == "confirm" and fb.pattern_id:
            key = (_aware(fb.created_at), fb.id or 0, fb.pattern_id)
            if fb.diagnosis_id not in v.confirmed or key > v.confirmed[fb.diagnosis_id]:
                v.confirmed[fb.diagnosis_id] = key
        elif fb.verdict == "reject":
            v.rejected.add((fb.diagnosis_id, fb.pattern_id))
    return v


def _effective_patterns(session: Session, rows: Sequence[_Row]) -> dict[int, str | None]:
    """Diagnosis id → the pattern that diagnosis alone counts for (its confirmation, else its match
    unless rejected)."""
    v = _verdicts(session, rows)
    return {r.id: _counted_pattern([r], r, v) for r in rows}


def _counted_pattern(rows: Sequence[_Row], latest: _Row, v: _Verdicts) -> str | None:
    """The pattern a job with diagnoses ``rows`` counts for (see the module docstring)."""
    confirmations = [v.confirmed[r.id] for r in rows if r.id in v.confirmed]
    if confirmations:
        return max(confirmations)[2]
    if not latest.matched or (latest.id, None) in v.rejected:
        return None
    return None if any((r.id, latest.matched) in v.rejected for r in rows) else latest.matched


def _jobs(rows: Sequence[_Row], v: _Verdicts) -> dict[str, _Job]:
    """Job id → the job (one window's rows)."""
    by_job: dict[str, list[_Row]] = defaultdict(list)
    for r in rows:
        by_job[r.job_id].append(r)
    out: dict[str, _Job] = {}
    for job_id, rs in by_job.items():
        latest = max(rs, key=lambda r: (r.time, r.id))
        out[job_id] = _Job(job_id=job_id, rows=rs, latest=latest, pattern=_counted_pattern(rs, latest, v))
    return out


def _patterns_by_id(session: Session, ids: Iterable[str]) -> dict[str, FaultPattern]:
    wanted = sorted({i for i in ids if i})
    out: dict[str, FaultPattern] = {}
    for part in _chunks(wanted):
        out.update((p.id, p) for p in session.exec(select(FaultPattern).where(FaultPattern.id.in_(part))))
    return out


def _trend(count: int, previous: int) -> str:
    if previous == 0:
        return "new"
    return "up" if count > previous else "down" if count < previous else "same"


def _fill_patterns(session: Session, dg: Digest, current: dict[str, _Job], previous: dict[str, _Job],
                   rules: DigestRules) -> None:
    now_counts = Counter(j.pattern for j in current.values() if j.pattern)
    prev_counts = Counter(j.pattern for j in previous.values() if j.pattern)
    ranked = sorted(now_counts, key=lambda p: (-now_counts[p], -prev_counts[p], p))
    dg.patterns_total = len(ranked)
    shown = ranked[:rules.max_patterns]
    seen = _seen_range(session, shown, dg.end)
    info = _patterns_by_id(session, shown)
    for pid in shown:
        p = info.get(pid)
        jobs = sorted(j.job_id for j in current.values() if j.pattern == pid)
        first, last = seen.get(pid, (None, None))
        dg.patterns.append(PatternTrend(
            pattern_id=pid, title=p.title if p else pid, category=p.category if p else "",
            severity=p.severity if p else "", count=now_counts[pid], previous=prev_counts[pid],
            trend=_trend(now_counts[pid], prev_counts[pid]), first_seen=first, last_seen=last, jobs=jobs))


def _seen_range(session: Session, pattern_ids: Sequence[str], end: datetime,
                ) -> dict[str, tuple[datetime, datetime]]:
    """First and last time (before ``end``) each pattern was counted for a diagnosis, all time."""
    if not pattern_ids:
        return {}
    confirmed_ids = select(Feedback.diagnosis_id).where(Feedback.verdict == "confirm",
                                                        Feedback.pattern_id.in_(list(pattern_ids)))
    rows = _rows(session, and_(_when() < end, or_(DiagnosisRecord.matched_pattern_id.in_(list(pattern_ids)),
                                                  DiagnosisRecord.id.in_(confirmed_ids))))
    effective = _effective_patterns(session, rows)
    out: dict[str, tuple[datetime, datetime]] = {}
    for r in rows:
        pid = effective[r.id]
        if pid in pattern_ids:
            lo, hi = out.get(pid, (r.time, r.time))
            out[pid] = (min(lo, r.time), max(hi, r.time))
    return out


def _fill_offenders(session: Session, dg: Digest, current: dict[str, _Job], rules: DigestRules) -> None:
    job_pattern = {r.id: j.pattern for j in current.values() for r in j.rows}
    stmt = select(NodeIncident).where(NodeIncident.time >= dg.start, NodeIncident.time < dg.end)
    by_node: dict[str, list[NodeIncident]] = defaultdict(list)
    for inc in session.exec(stmt):
        by_node[inc.node].append(inc)
    offenders: list[NodeOffender] = []
    for node, incs in by_node.items():
        jobs = sorted({i.job_id for i in incs})
        if len(jobs) < rules.repeat_offender_min_jobs:
            continue
        per_job = {(i.job_id, p) for i in incs  # a job asked about twice counts once
                   if (p := job_pattern[i.diagnosis_id] if i.diagnosis_id in job_pattern else i.pattern_id)}
        pats = Counter(p for _, p in per_job)
        offenders.append(NodeOffender(
            node=node, jobs=jobs, incidents=len(incs), max_score=max(float(i.score) for i in incs),
            last_seen=max(_aware(i.time) for i in incs),
            patterns=[p for p, _ in sorted(pats.items(), key=lambda kv: (-kv[1], kv[0]))]))
    info = _patterns_by_id(session, (p for o in offenders for p in o.patterns))
    for o in offenders:
        o.recommendation, o.reason = _recommend(o, info, rules)
    offenders.sort(key=lambda o: (o.recommendation != "drain", -len(o.jobs), -o.max_score, o.node))
    dg.offenders_total = len(offenders)
    dg.offenders = offenders[:rules.max_offenders]


def _recommend(o: NodeOffender, info: dict[str, FaultPattern], rules: DigestRules) -> tuple[str, str]:
    if len(o.jobs) >= rules.drain_min_jobs:
        return "drain", f"implicated in {len(o.jobs)} failed jobs"
    for pid in o.patterns:
        p = info.get(pid)
        if p is not None and p.severity in rules.drain_severities:
            return "drain", f"{p.severity} fault pattern {pid}"
        if p is not None and p.category in rules.drain_categories:
            return "drain", f"{p.category} fault pattern {pid}"
    return "inspect", f"implicated in {len(o.jobs)} failed jobs"


def _fill_backlog(session: Session, dg: Digest, rules: DigestRules) -> None:
    """Jobs without an SRE's verdict on any of their diagnoses, each as its latest diagnosis
    (before the end of the window), oldest first."""
    D = DiagnosisRecord
    handled = select(D.job_id).join(Feedback, Feedback.diagnosis_id == D.id)
    rank = func.row_number().over(partition_by=D.job_id, order_by=(_when().desc(), D.id.desc()))
    latest = (select(D.id, D.job_id, D.status, D.matched_pattern_id, _when().label("at"), D.slack_channel,
                     D.slack_thread_ts, rank.label("rank"))
              .where(_when() < dg.end, D.job_id.not_in(handled)).subquery())
    one_per_job = latest.c.rank == 1
    dg.backlog_total = int(session.exec(select(func.count()).select_from(latest).where(one_per_job)).one())
    dg.backlog_in_window = int(session.exec(
        select(func.count()).select_from(latest).where(one_per_job, latest.c.at >= dg.start)).one())
    stmt = (select(latest.c.id, latest.c.job_id, latest.c.status, latest.c.matched_pattern_id, latest.c.at,
                   latest.c.slack_channel, latest.c.slack_thread_ts)
            .where(one_per_job).order_by(latest.c.at, latest.c.id).limit(rules.max_backlog))
    for i, job, status, matched, at, ch, ts in session.exec(stmt):
        dg.backlog.append(BacklogItem(
            diagnosis_id=i, job_id=job, status=status, diagnosed_at=_aware(at), pattern_id=matched,
            slack_channel=ch, slack_thread_ts=ts, link=slack_thread_link(ch, ts)))
    _link_earlier_threads(session, dg)


def _link_earlier_threads(session: Session, dg: Digest) -> None:
    """A backlog job whose latest diagnosis was not posted in Slack (e.g. a CLI run) links to the
    newest thread of the job that was, where an SRE can give the verdict."""
    unlinked = {b.job_id: b for b in dg.backlog if b.link is None}
    if not unlinked:
        return
    D = DiagnosisRecord
    stmt = (select(D.job_id, D.slack_channel, D.slack_thread_ts)
            .where(D.job_id.in_(list(unlinked)), _when() < dg.end, D.slack_channel.is_not(None),
                   D.slack_thread_ts.is_not(None))
            .order_by(_when(), D.id))
    for job, ch, ts in session.exec(stmt):  # the newest comes last and wins
        b = unlinked[job]
        b.slack_channel, b.slack_thread_ts, b.link = ch, ts, slack_thread_link(ch, ts)


def _fill_times(session: Session, dg: Digest, current: list[_Row]) -> None:
    waits = [(r.time - r.requested_at).total_seconds() for r in current if r.requested_at]
    dg.median_to_diagnosis = statistics.median(max(0.0, w) for w in waits) if waits else None
    first = func.min(Feedback.created_at)
    stmt = (select(Feedback.diagnosis_id, first).where(Feedback.verdict == "confirm")
            .group_by(Feedback.diagnosis_id).having(first >= dg.start, first < dg.end))
    in_window = {d: _aware(t) for d, t in session.exec(stmt)}
    dg.confirmations = len(in_window)
    starts: dict[int, datetime] = {}
    for part in _chunks(list(in_window)):
        starts.update((r.id, r.requested_at or r.time) for r in _rows(session, DiagnosisRecord.id.in_(part)))
    spans = [max(0.0, (t - starts[d]).total_seconds()) for d, t in in_window.items() if d in starts]
    dg.median_to_confirmation = statistics.median(spans) if spans else None


def _fill_days(dg: Digest, jobs: list[_Job], rules: DigestRules) -> None:
    n = 2 * dg.days
    dg.day_starts = [dg.previous_start + timedelta(days=i) for i in range(n)]
    plotted = [p.pattern_id for p in dg.patterns[:rules.plotted_patterns]]
    dg.pattern_days = {pid: [0] * n for pid in plotted}
    for j in jobs:
        if j.pattern in dg.pattern_days:
            i = min(n - 1, int((j.latest.time - dg.previous_start).total_seconds() // 86400))
            dg.pattern_days[j.pattern][i] += 1


def _jsonable(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v
