"""The built-in fault library: versioned YAML files in ``kb/library/*.yaml``.

Each file has a ``version``. :func:`load` inserts the patterns of every file whose version is
newer than the one recorded in the database (``kb_meta`` key ``library:<file stem>``). Built-in
patterns are updated in place (version + 1 when their content changed) but keep the SRE's
``enabled``/``flagged`` state; patterns whose source is "confirmed" (typed in, imported or
edited by SREs) are never overwritten.

Beside the stored fields, a library pattern carries data that stays in the YAML (read with
:func:`library_meta`): ``reference`` (the URL or document it was written from), ``example`` (one
real line its signature matches; the library test checks it) and ``explains`` (ids of patterns
this one is the root of, ``prefix-*`` for a family; the matcher ranks a match before the matches
it explains).
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml
from sqlalchemy import text
from sqlmodel import Session

from kb import KbError
from kb.models import FaultPattern, KbMeta, utcnow
from kb.patterns_io import CONTENT_FIELDS, validate_pattern_dict

# libyaml's safe loader (10x faster: the library is read at every open of a knowledge base), when
# PyYAML was built with it; the same documents either way
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

META_PREFIX = "library:"
LIBRARY_ONLY_FIELDS = ("reference", "example", "explains")


@dataclass
class LibraryFile:
    name: str  # file stem, e.g. "nccl"
    version: int
    patterns: list[dict[str, Any]]
    meta: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # id -> library-only fields


def _library_fields(where: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Check and return the library-only fields of one raw pattern mapping."""
    meta: dict[str, Any] = {}
    for key in ("reference", "example"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise KbError(f"{where}: {key} must be a non-empty string")
        meta[key] = value
    explains = raw.get("explains") or []
    if not isinstance(explains, list) or not all(isinstance(e, str) and e.strip() for e in explains):
        raise KbError(f"{where}: explains must be a list of pattern ids")
    meta["explains"] = [e.strip() for e in explains]
    return meta


def read_library() -> list[LibraryFile]:
    """Parse and validate every library file (sorted by name)."""
    files: list[LibraryFile] = []
    root = resources.files("kb").joinpath("library")
    seen: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        stem = entry.name[: -len(".yaml")]
        doc = yaml.load(entry.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
        if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) or doc["version"] < 1:
            raise KbError(f"library/{entry.name}: needs an integer 'version' >= 1")
        pats = []
        meta: dict[str, dict[str, Any]] = {}
        for raw in doc.get("patterns") or []:
            if not isinstance(raw, dict):
                raise KbError(f"library/{entry.name}: a pattern must be a mapping")
            content = {k: v for k, v in raw.items() if k not in LIBRARY_ONLY_FIELDS}
            d = validate_pattern_dict(content, check_broad=False)
            if d["id"] in seen:
                raise KbError(f"library/{entry.name}: duplicate id {d['id']} (also in {seen[d['id']]})")
            seen[d["id"]] = entry.name
            meta[d["id"]] = _library_fields(f"library/{entry.name}: {d['id']}", raw)
            pats.append(d)
        files.append(LibraryFile(stem, doc["version"], pats, meta))
    return files


@functools.lru_cache(maxsize=1)
def _meta_cached() -> dict[str, dict[str, Any]]:
    return {pid: m for f in read_library() for pid, m in f.meta.items()}


def library_meta() -> dict[str, dict[str, Any]]:
    """Library-only fields (reference, example, explains) of every built-in pattern, by id."""
    return _meta_cached()


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


EXAMPLE_TEST = "tests/kb/test_library_examples.py::test_pattern_has_reference_and_matching_example[{id}]"


def provenance(pid: str, signature: Any = None) -> dict[str, Any]:
    """Where a built-in pattern comes from and how it is tested: reference, example line, explains,
    the test that checks the example, and whether ``signature`` (default: the library's) matches it
    now. Empty dict for ids that are not in the built-in library (SRE patterns)."""
    from kb.signatures import compile_re2, entry_regex, normalize_signature

    meta = library_meta().get(pid)
    if meta is None:
        return {}
    if signature is None:
        signature = next((p["signature"] for p in builtin_patterns() if p["id"] == pid), [])
    example = meta.get("example")
    matches = bool(example) and any(compile_re2(entry_regex(e)).search(example) is not None
                                    for e in normalize_signature(signature))
    return {"reference": meta.get("reference"), "example": example, "explains": meta.get("explains") or [],
            "test": EXAMPLE_TEST.format(id=pid), "example_matches": matches}
