"""The triage service used by the CLI and the bot.

resolve the job → parse it with its history → filter with the family's normal pool → engine →
match the remaining events against the knowledge base's patterns → store the diagnosis.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy.engine import Engine

from bot.cluster import parse_on_cluster
from bot.config import Settings
from bot.resolve import ResolvedJob, resolve
from bot.sources.jobids import is_safe_job_id
from engine.ingest import JobSpec, discover
from engine.job_analysis import JobAnalysis, analyse_job
from engine.known import KnownSignature
from engine.model import Diagnosis, ParsedJob
from engine.parse import Progress
from kb import db as kbdb
from kb import diagnoses, pools
from kb.known import stored_signatures
from kb.matcher import load_matcher
from kb.signals import match_signals


@dataclass
class TriageRequest:
    job: str
    history: Sequence[str] = field(default_factory=list)
    no_match: bool = False
    top_nodes: int = 5
    database_url: str | None = None  # default: L4_DATABASE_URL, else the user's data folder
    # an open knowledge base to use instead of opening `database_url` (a long-running bot opens
    # and migrates it once); triage leaves it open
    engine: Engine | None = field(default=None, repr=False, compare=False)
    # where and when the bot was asked (stored with the diagnosis; digests link back to the thread)
    requested_at: datetime | None = None
    slack_channel: str | None = None
    slack_thread_ts: str | None = None
    settings: Settings | None = None  # default: Settings.from_env()
    local_paths: bool = True  # False for text from chat: only job IDs and report links resolve
    dask: str | None = None  # a Dask scheduler address for this request (default: L4_DASK_SCHEDULER)
    # the bot's durable request (kb.requests) this analysis answers: it records the diagnosis' ID in
    # the transaction that stores it, so a restart never analyses a stored request twice
    bot_request_id: int | None = None


@dataclass
class TriageResult:
    diagnosis: Diagnosis
    diagnosis_id: int
    job_path: Path


LABEL_LIMIT = 200  # characters of a job.json job_id shown as a label


def job_identity(resolved: ResolvedJob, stated: str) -> tuple[str, str | None]:
    """(the job's ID, a label or None): the job asked for is the job. The job_id its job.json states
    (`stated`) only labels it when it differs, cut to LABEL_LIMIT; a folder given by path is named
    by its job.json when that is a plain job ID (the user chose the folder)."""
    ident = resolved.job_id
    if resolved.confine is None and is_safe_job_id(stated):
        ident = stated
    label = " ".join(stated.split())
    if not label or label == ident:
        return ident, None
    return ident, label if len(label) <= LABEL_LIMIT else label[: LABEL_LIMIT - 1] + "…"


def _discover(resolved: ResolvedJob) -> JobSpec:
    return discover(resolved.path, confine=resolved.confine)


@dataclass
class Prepared:
    """A job resolved and ready to analyse: its folders (held until released), the history's, and
    the knowledge base's normal pool for its family."""

    resolved: ResolvedJob
    job: JobSpec
    history: list[JobSpec]
    pool: list[str]
    # the knowledge base's enabled patterns, evidence for the engine's ranking (none with no_match)
    known: list[KnownSignature] = field(default_factory=list)


@contextmanager
def prepared(req: TriageRequest, settings: Settings, engine: Engine,
             on_fetch: Callable[[int, int | None], None] | None = None) -> Iterator[Prepared]:
    """Resolve `req.job` and its history (remote ones fetched into the cache, held there until the
    block ends: not evicted nor rewritten while they are parsed) and read the normal pool."""
    with ExitStack() as held:
        resolved = held.enter_context(resolve(req.job, settings=settings, local_paths=req.local_paths,
                                              progress=on_fetch))
        job = _discover(resolved)
        if not job.settings and resolved.report and isinstance(resolved.report.get("settings"), dict):
            job.settings = dict(resolved.report["settings"])  # the report knows the job family
        history = [_discover(held.enter_context(resolve(h, settings=settings, local_paths=req.local_paths,
                                                        progress=on_fetch)))
                   for h in req.history]
        with kbdb.session(engine) as s:
            pool = sorted(pools.normal_templates(s, job.settings))
            known = [] if req.no_match else stored_signatures(s)
        yield Prepared(resolved, job, history, pool, known)


def conclude(req: TriageRequest, prep: Prepared, analysis: JobAnalysis, engine: Engine,
             phase: Callable[[str], None]) -> TriageResult:
    """Match the analysis against the knowledge base's patterns and store the diagnosis (with the
    bot's request, when there is one, in the same transaction)."""
    diagnosis = analysis.diagnosis
    diagnosis.report = prep.resolved.report
    diagnosis.job_id, diagnosis.job_label = job_identity(prep.resolved, analysis.evidence.job_id)
    with kbdb.session(engine) as s:
        if not req.no_match:
            phase("matching")
            matcher = load_matcher(s)
            roots = [m for m in matcher.match_templates(analysis.fresh) if m.kind == "root"]
            if not roots:  # a fault without an error line of its own: the per-node signals
                roots = match_signals(analysis.evidence, matcher, analysis.fresh)
            if roots:
                diagnosis.matches = roots
                diagnosis.status = "matched"
        phase("storing")
        diagnosis_id = diagnoses.store(s, diagnosis, prep.job.settings, requested_at=req.requested_at,
                                       slack_channel=req.slack_channel, slack_thread_ts=req.slack_thread_ts)
        if req.bot_request_id is not None:
            from kb import requests as bot_requests

            bot_requests.set_diagnosis(s, req.bot_request_id, diagnosis_id)
        s.commit()
    return TriageResult(diagnosis=diagnosis, diagnosis_id=diagnosis_id, job_path=prep.job.root)


def triage(req: TriageRequest, progress: Progress | None = None,
           on_phase: Callable[[str], None] | None = None,
           on_fetch: Callable[[int, int | None], None] | None = None) -> TriageResult:
    """Diagnose `req.job` (a folder, a job ID or a failure-report link). Raises
    engine.ingest.JobError for bad input.

    `on_phase` is told each phase as it starts: resolving, parsing, analyzing, matching, storing.
    `on_fetch(bytes done, bytes expected or None)` follows the download of remote logs."""
    phase = on_phase or (lambda _name: None)
    phase("resolving")
    settings = req.settings or Settings.from_env()
    engine = req.engine if req.engine is not None else kbdb.open_db(req.database_url)

    def parse(jobs: list[JobSpec]) -> list[ParsedJob]:
        parsed = parse_on_cluster(jobs, scheduler=req.dask or settings.dask_scheduler,
                                  fallback=settings.dask_fallback, progress=progress,
                                  connect_timeout=settings.dask_connect_timeout)
        phase("analyzing")
        return parsed
    try:
        with prepared(req, settings, engine, on_fetch) as prep:
            phase("parsing")
            analysis = analyse_job(prep.job, prep.history, prep.pool, parse=parse, top_nodes=req.top_nodes,
                                   known=prep.known)
        return conclude(req, prep, analysis, engine, phase)
    finally:
        if req.engine is None:
            engine.dispose()  # opened here: closed here, failures included
