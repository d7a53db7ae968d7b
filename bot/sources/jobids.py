"""Job IDs: safe to use as one folder name under a log root, and the configured pattern."""
from __future__ import annotations

import re

from engine.ingest import JobError

# whatever the configured pattern says, a job ID is one plain path segment
SAFE_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_safe_job_id(text: str) -> bool:
    """True when `text` is one plain path segment: no separators, no '..', not hidden."""
    return bool(SAFE_JOB_ID.fullmatch(text)) and ".." not in text


def matches_pattern(text: str, pattern: str) -> bool:
    """True when the configured job-ID pattern (L4_JOB_ID_PATTERN) matches all of `text`."""
    return re.fullmatch(pattern, text) is not None


def validate_job_id(text: str, pattern: str | None = None) -> str:
    """`text` as a job ID, or JobError: it must be safe and, when `pattern` is given, match it."""
    job_id = text.strip()
    if not is_safe_job_id(job_id):
        raise JobError(f"not a valid job ID: {shorten(job_id)} "
                       "(letters, digits, '.', '_', '-'; no '/' or '..')")
    if pattern is not None and not matches_pattern(job_id, pattern):
        raise JobError(f"not a valid job ID: {shorten(job_id)} does not match L4_JOB_ID_PATTERN")
    return job_id


def shorten(text: str, limit: int = 80) -> str:
    text = text.replace("\n", " ").replace("\r", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
