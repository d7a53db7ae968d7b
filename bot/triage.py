"""The triage service used by the CLI and the bot.

resolve the job → parse it with its history → filter with the family's normal pool → engine →
match the remaining events against the knowledge base's patterns → store the diagnosis.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.resolve import resolve
from engine.diagnose import analyze
from engine.filter import candidate_events, normal_templates
from engine.ingest import discover
from engine.model import Diagnosis
from engine.parse import Progress, parse_jobs
from kb import db as kbdb
from kb import diagnoses, pools
from kb.matcher import load_matcher


@dataclass
class TriageRequest:
    job: str
    history: Sequence[str] = field(default_factory=list)
    no_match: bool = False
    top_nodes: int = 5
    database_url: str | None = None  # default: L4_DATABASE_URL, else the user's data folder


@dataclass
class TriageResult:
    diagnosis: Diagnosis
    diagnosis_id: int
    job_path: Path


def triage(req: TriageRequest, progress: Progress | None = None) -> TriageResult:
    """Diagnose `req.job` (a folder or a job ID). Raises engine.ingest.JobError for bad input."""
    resolved = resolve(req.job)  # a folder, a job ID or a failure-report link
    job = discover(resolved.path)
    if not job.settings and resolved.report and isinstance(resolved.report.get("settings"), dict):
        job.settings = dict(resolved.report["settings"])  # the report knows the job family
    history = [resolve(h).path for h in req.history]
    engine = kbdb.open_db(req.database_url)
    with kbdb.session(engine) as s:
        pool = pools.normal_templates(s, job.settings)
    parsed = parse_jobs([job, *history], progress=progress)
    failed = parsed[0]
    diagnosis = analyze(failed, parsed[1:], normal=pool, top_nodes=req.top_nodes)
    diagnosis.report = resolved.report
    with kbdb.session(engine) as s:
        if not req.no_match:
            normal = normal_templates(parsed[1:], pool)
            fresh = [failed.templates[i] for i in candidate_events(failed, normal)]
            roots = [m for m in load_matcher(s).match_templates(fresh) if m.kind == "root"]
            if roots:
                diagnosis.matches = roots
                diagnosis.status = "matched"
        diagnosis_id = diagnoses.store(s, diagnosis, job.settings)
        s.commit()
    return TriageResult(diagnosis=diagnosis, diagnosis_id=diagnosis_id, job_path=job.root)
