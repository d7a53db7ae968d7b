"""Job families and their normal event pools (templates seen in succeeded jobs)."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from engine.model import ParsedJob
from kb import KbError
from kb.models import JobFamily, LearnedJob, NormalEvent


def canonical_settings(settings: dict[str, Any] | None) -> str:
    """Canonical JSON of job.json ``settings``: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(settings or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def family_key(settings: dict[str, Any] | None) -> str:
    """Stable family key: sha256 hex of :func:`canonical_settings`."""
    return hashlib.sha256(canonical_settings(settings).encode("utf-8")).hexdigest()


def template_hash(template: str) -> str:
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


def ensure_family(session: Session, settings: dict[str, Any] | None) -> JobFamily:
    """The family row for ``settings``, created if missing (concurrency-safe)."""
    key = family_key(settings)
    fam = session.get(JobFamily, key)
    if fam is not None:
        return fam
    fam = JobFamily(key=key, settings=json.loads(canonical_settings(settings)))
    try:
        with session.begin_nested():
            session.add(fam)
    except IntegrityError:  # another writer created it first
        fam = session.get(JobFamily, key)
        assert fam is not None
    return fam


def learn(session: Session, parsed: ParsedJob) -> bool:
    """Add a succeeded job's templates to its family's normal pool. Caller commits.

    Idempotent per job id: returns False (and changes nothing) when the job was learned before.
    A job whose status is "failed" is refused (KbError).
    """
    if parsed.status == "failed":
        raise KbError(f"job {parsed.job_id} failed; only succeeded jobs go into the normal pool")
    if not parsed.job_id:
        raise KbError("the job has no job id")
    fam = ensure_family(session, parsed.settings)
    done = session.exec(select(LearnedJob).where(LearnedJob.family_key == fam.key,
                                                 LearnedJob.job_id == parsed.job_id)).first()
    if done is not None:
        return False
    counts: dict[str, int] = {}
    for t in parsed.templates:
        counts[t.template] = counts.get(t.template, 0) + max(t.count, 0)
    try:
        with session.begin_nested():
            session.add(LearnedJob(family_key=fam.key, job_id=parsed.job_id))
            session.flush()
    except IntegrityError:  # learned concurrently by another writer
        return False
    hashes = {template_hash(t): t for t in counts}
    existing = {
        e.template_hash: e
        for chunk in _chunks(list(hashes), 500)
        for e in session.exec(select(NormalEvent).where(NormalEvent.family_key == fam.key,
                                                        NormalEvent.template_hash.in_(chunk)))
    }
    for h, t in hashes.items():
        e = existing.get(h)
        if e is None:
            session.add(NormalEvent(family_key=fam.key, template_hash=h, template=t,
                                    jobs_seen=1, total_count=counts[t]))
        else:
            e.jobs_seen += 1
            e.total_count += counts[t]
            session.add(e)
    session.flush()
    return True


def normal_templates(session: Session, settings: dict[str, Any] | None, *, min_jobs: int = 1) -> set[str]:
    """Templates of the family's normal pool seen in at least ``min_jobs`` succeeded jobs."""
    key = family_key(settings)
    stmt = select(NormalEvent.template).where(NormalEvent.family_key == key,
                                              NormalEvent.jobs_seen >= min_jobs)
    return set(session.exec(stmt))


def learned_jobs(session: Session, settings: dict[str, Any] | None) -> list[str]:
    stmt = select(LearnedJob.job_id).where(LearnedJob.family_key == family_key(settings))
    return sorted(session.exec(stmt))


def _chunks(items: list[str], n: int) -> list[list[str]]:
    return [items[i:i + n] for i in range(0, len(items), n)]
