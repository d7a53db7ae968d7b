"""Fault patterns as plain dicts/YAML: validation, export and import.

The YAML form is the one of the built-in library (``kb/library/*.yaml``)::

    version: 1
    patterns:
      - id: my-pattern            # stable slug
        title: ...
        category: hardware/network   # engine.model.CATEGORIES
        kind: root                # root | cascade
        severity: high            # critical | high | medium | low
        description: ...
        remediation: ...
        signature: ['<RE2 regex>', {template: '<Drain template>'}, {literal: '<text>'}]
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from sqlmodel import Session, select

from engine.model import CATEGORIES
from kb import KbError
from kb.models import PATTERN_KINDS, SEVERITIES, FaultPattern, utcnow
from kb.signatures import validate_signature

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{1,118}[a-z0-9]$")
CONTENT_FIELDS = ("title", "category", "kind", "severity", "description", "remediation", "signature")
_ALLOWED_KEYS = {"id", *CONTENT_FIELDS, "enabled", "version", "source", "created_by", "created_at", "flagged"}


def slugify(text: str, *, max_len: int = 80) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:max_len].strip("-")
    return slug if len(slug) >= 3 else f"pattern-{slug}".strip("-")


def validate_pattern_dict(data: Any, *, check_broad: bool = True) -> dict[str, Any]:
    """Check one pattern mapping and return its normalized content fields (plus ``id``).

    Raises KbError naming the first problem. ``check_broad=False`` skips the normal-line
    probe (used for the built-in library, which the tests check separately).
    """
    if not isinstance(data, dict):
        raise KbError(f"a pattern must be a mapping, not {type(data).__name__}")
    unknown = set(data) - _ALLOWED_KEYS
    if unknown:
        raise KbError(f"unknown pattern field(s): {', '.join(sorted(unknown))}")
    pid = data.get("id")
    if not isinstance(pid, str) or not SLUG_RE.match(pid):
        raise KbError(f"pattern id must be a slug (a-z, 0-9, '.', '_', '-'; 3-120 chars): {pid!r}")
    out: dict[str, Any] = {"id": pid}
    title = data.get("title")
    if not isinstance(title, str) or not title.strip() or len(title) > 300:
        raise KbError(f"{pid}: title must be a non-empty string of at most 300 characters")
    out["title"] = title.strip()
    category = data.get("category")
    if category not in CATEGORIES:
        raise KbError(f"{pid}: category must be one of {', '.join(CATEGORIES)}; got {category!r}")
    out["category"] = category
    kind = data.get("kind", "root")
    if kind not in PATTERN_KINDS:
        raise KbError(f"{pid}: kind must be root or cascade; got {kind!r}")
    out["kind"] = kind
    severity = data.get("severity", "medium")
    if severity not in SEVERITIES:
        raise KbError(f"{pid}: severity must be one of {', '.join(SEVERITIES)}; got {severity!r}")
    out["severity"] = severity
    for key in ("description", "remediation"):
        value = data.get(key, "") or ""
        if not isinstance(value, str):
            raise KbError(f"{pid}: {key} must be a string")
        out[key] = value.strip()
    try:
        out["signature"] = validate_signature(data.get("signature"), probes=None if check_broad else ())
    except KbError as exc:
        raise KbError(f"{pid}: {exc}") from None
    return out


def pattern_to_dict(p: FaultPattern, *, full: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {"id": p.id}
    for key in CONTENT_FIELDS:
        d[key] = getattr(p, key)
    d["enabled"] = p.enabled
    if full:
        d.update(source=p.source, version=p.version, flagged=p.flagged, created_by=p.created_by,
                 created_at=p.created_at.isoformat() if p.created_at else None)
    return d


def read_patterns_yaml(text: str) -> list[dict[str, Any]]:
    """Patterns from YAML: a library document ({patterns: [...]}), a list, or one mapping."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KbError(f"invalid YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(doc, dict) and "patterns" in doc:
        doc = doc["patterns"]
    elif isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not doc:
        raise KbError("YAML must hold a pattern, a list of patterns, or {patterns: [...]}")
    return doc


def read_patterns_file(path: str | Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise KbError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise KbError(f"{path} is not a YAML text file (not UTF-8 at byte {exc.start})") from None
    if "\0" in text:
        raise KbError(f"{path} is not a YAML text file (it holds NUL bytes)")
    return read_patterns_yaml(text)


def add_patterns(session: Session, items: Iterable[dict[str, Any]], *, user: str) -> list[FaultPattern]:
    """Insert new SRE patterns (source "confirmed"); any existing id is an error. Caller commits."""
    items = [validate_pattern_dict(d) | {"enabled": bool(d.get("enabled", True))} for d in items]
    seen: set[str] = set()
    for d in items:
        if d["id"] in seen or session.get(FaultPattern, d["id"]) is not None:
            raise KbError(f"pattern {d['id']} already exists")
        seen.add(d["id"])
    created = [FaultPattern(**d, source="confirmed", created_by=user, created_at=utcnow()) for d in items]
    session.add_all(created)
    session.flush()
    return created


def _imported(d: dict[str, Any], enabled: Any, user: str) -> FaultPattern:
    return FaultPattern(**d, enabled=True if enabled is None else bool(enabled), source="confirmed",
                        created_by=user, created_at=utcnow())


def _copy_id(session: Session, pid: str, taken: set[str]) -> str:
    base = f"{pid[:112]}-sre"
    new, n = base, 2
    while new in taken or session.get(FaultPattern, new) is not None:
        new, n = f"{base}-{n}", n + 1
    return new


def import_patterns(session: Session, items: Iterable[dict[str, Any]], *, user: str,
                    force: bool = False) -> dict[str, list[str]]:
    """Upsert patterns (e.g. from another installation's export). Unchanged ones are skipped;
    changed ones get their content replaced, version + 1 and source "confirmed". Caller commits.

    A built-in pattern is never replaced by an import whose content differs: the imported one is
    added as the SRE's own copy under a new ID (``<id>-sre``, listed under "copied" as
    ``"builtin -> copy"``), unless ``force``; then the built-in is replaced (listed under
    "replaced_builtin"; the caller warns) and, being "confirmed" now, no library update touches it.
    """
    result: dict[str, list[str]] = {"added": [], "updated": [], "unchanged": [], "copied": [],
                                    "replaced_builtin": []}
    validated = [(validate_pattern_dict(d), d.get("enabled")) for d in items]
    taken = {d["id"] for d, _ in validated}
    for d, enabled in validated:
        existing = session.get(FaultPattern, d["id"])
        changed_content = existing is not None and any(getattr(existing, k) != d[k] for k in CONTENT_FIELDS)
        if existing is not None and existing.source == "builtin" and changed_content and not force:
            copy_id = _copy_id(session, d["id"], taken)
            taken.add(copy_id)
            session.add(_imported(d | {"id": copy_id}, enabled, user))
            result["copied"].append(f"{d['id']} -> {copy_id}")
            continue
        if existing is None:
            session.add(_imported(d, enabled, user))
            result["added"].append(d["id"])
            continue
        changed = changed_content
        if enabled is not None and existing.enabled != bool(enabled):
            existing.enabled = bool(enabled)
            changed = True
        if not changed:
            result["unchanged"].append(d["id"])
            continue
        if not changed_content:  # only enabled/disabled: a built-in stays built-in
            session.add(existing)
            result["updated"].append(d["id"])
            continue
        was_builtin = existing.source == "builtin"
        for k in CONTENT_FIELDS:
            setattr(existing, k, d[k])
        existing.version += 1
        existing.source = "confirmed"
        session.add(existing)
        result["replaced_builtin" if was_builtin else "updated"].append(d["id"])
    session.flush()
    return result


def export_patterns(session: Session, *, include_disabled: bool = True) -> str:
    """All patterns as a YAML document that :func:`import_patterns` reads back."""
    stmt = select(FaultPattern).order_by(FaultPattern.id)
    rows = [p for p in session.exec(stmt) if include_disabled or p.enabled]
    doc = {"version": 1, "patterns": [pattern_to_dict(p) for p in rows]}
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
