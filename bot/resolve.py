"""Turning what a user typed (a folder, a job ID) into a job folder on disk."""

from __future__ import annotations

import os
import re
from pathlib import Path

from engine.ingest import JobError

JOB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def log_root() -> Path:
    return Path(os.environ.get("L4_LOG_ROOT") or "./jobs")


def resolve_job(ref: str) -> Path:
    """A job folder for `ref`: an existing folder, or a job ID under L4_LOG_ROOT. Raises JobError."""
    ref = ref.strip()
    if not ref:
        raise JobError("no job given")
    if "://" in ref:
        raise JobError(
            f"cannot fetch {_short(ref)}: failure-report links are not supported by this build yet; "
            "pass the job folder or a job ID under L4_LOG_ROOT"
        )
    path = Path(ref)
    if path.is_dir():
        return path
    if path.exists():
        raise JobError(f"not a job folder: {ref}")
    if not JOB_ID_RE.match(ref) or ref in (".", ".."):
        raise JobError(f"no such job folder: {_short(ref)}")
    candidate = log_root() / ref
    if candidate.is_dir():
        return candidate
    raise JobError(f"unknown job '{ref}': no folder {ref} here nor under L4_LOG_ROOT ({log_root()})")


def _short(text: str, limit: int = 120) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
