"""The built-in fault library: versioned YAML files in ``kb/library/*.yaml``.

Each file has a ``version``. :func:`load` inserts the patterns of every file whose version is
newer than the one recorded in the database (``kb_meta`` key ``library:<file stem>``). Built-in
patterns are updated in place (version + 1 when their content changed) but keep the SRE's
``enabled``/``flagged`` state; patterns whose source is "confirmed" (typed in, imported or
edited by SREs) are never overwritten.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml
from sqlalchemy import text
from sqlmodel import Session

from kb import KbError
from kb.models import FaultPattern, KbMeta, utcnow
from kb.patterns_io import CONTENT_FIELDS, validate_pattern_dict

META_PREFIX = "library:"


@dataclass
class LibraryFile:
    name: str  # file stem, e.g. "nccl"
    version: int
    patterns: list[dict[str, Any]]


def read_library() -> list[LibraryFile]:
    """Parse and validate every library file (sorted by name)."""
    files: list[LibraryFile] = []
    root = resources.files("kb").joinpath("library")
    seen: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        stem = entry.name[: -len(".yaml")]
        doc = yaml.safe_load(entry.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) or doc["version"] < 1:
            raise KbError(f"library/{entry.name}: needs an integer 'version' >= 1")
        pats = []
        for raw in doc.get("patterns") or []:
            d = validate_pattern_dict(raw, check_broad=False)
            if d["id"] in seen:
                raise KbError(f"library/{entry.name}: duplicate id {d['id']} (also in {seen[d['id']]})")
            seen[d["id"]] = entry.name
            pats.append(d)
        files.append(LibraryFile(stem, doc["version"], pats))
    return files


def builtin_patterns() -> list[dict[str, Any]]:
    return [p for f in read_library() for p in f.patterns]


def load(session: Session) -> dict[str, int]:
    """Bring the built-in patterns of the database up to the shipped library. Caller commits.

    Returns counts: added, updated, kept (confirmed patterns left alone), files (loaded files).
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(4242424243)"))
    stats = {"added": 0, "updated": 0, "kept": 0, "files": 0}
    for f in read_library():
        key = META_PREFIX + f.name
        meta = session.get(KbMeta, key)
        if meta is not None and int(meta.value) >= f.version:
            continue
        stats["files"] += 1
        for d in f.patterns:
            existing = session.get(FaultPattern, d["id"])
            if existing is None:
                session.add(FaultPattern(**d, source="builtin", created_by="l4-library",
                                         created_at=utcnow()))
                stats["added"] += 1
            elif existing.source != "builtin":
                stats["kept"] += 1
            elif any(getattr(existing, k) != d[k] for k in CONTENT_FIELDS):
                for k in CONTENT_FIELDS:
                    setattr(existing, k, d[k])
                existing.version += 1
                session.add(existing)
                stats["updated"] += 1
        if meta is None:
            session.add(KbMeta(key=key, value=str(f.version)))
        else:
            meta.value = str(f.version)
            session.add(meta)
        session.flush()
    return stats
