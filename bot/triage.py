"""The triage service used by the CLI and the bot: resolve the job → engine → Diagnosis."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.resolve import resolve_job
from engine.diagnose import analyze
from engine.model import Diagnosis
from engine.parse import Progress, parse_jobs


@dataclass
class TriageRequest:
    job: str
    history: Sequence[str] = field(default_factory=list)
    no_match: bool = False
    top_nodes: int = 5


def triage(req: TriageRequest, progress: Progress | None = None) -> Diagnosis:
    """Diagnose `req.job` (a folder or a job ID). Raises engine.ingest.JobError for bad input."""
    job = resolve_job(req.job)
    history: list[Path] = [resolve_job(h) for h in req.history]
    parsed = parse_jobs([job, *history], progress=progress)
    return analyze(parsed[0], parsed[1:], top_nodes=req.top_nodes)
