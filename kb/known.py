"""The knowledge base's fault patterns as the engine's `KnownSignature`s (kb → engine, plain data).

The engine's ranking reads a known signature's match as evidence (`engine.known`): a root pattern
lifts its line to the pattern's weight, a cascade pattern marks its line a consequence, and a
pattern another match explains (library ``explains``) becomes that one's consequence. Every
enabled pattern counts, built-in and SRE-confirmed alike; a pattern's severity is its weight.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from sqlmodel import Session, select

from engine.known import KnownSignature
from kb.models import FaultPattern
from kb.signatures import entry_regex, normalize_signature

# the severity a root pattern's line is given in the ranking, by the pattern's severity
WEIGHTS = {"critical": 1.0, "high": 0.95, "medium": 0.85, "low": 0.7}


def _field(p: Any, name: str, default: Any = None) -> Any:
    return p.get(name, default) if isinstance(p, dict) else getattr(p, name, default)


def signatures(patterns: Iterable[Any]) -> list[KnownSignature]:
    """The enabled ones of `patterns` (FaultPattern rows or dicts with their fields) as signatures."""
    from kb.library import library_meta

    meta = library_meta()
    out = []
    for p in patterns:
        if not _field(p, "enabled", True):
            continue
        pid = _field(p, "id")
        regexes = tuple(entry_regex(e) for e in normalize_signature(_field(p, "signature")))
        out.append(KnownSignature(id=pid, regexes=regexes, root=_field(p, "kind", "root") == "root",
                                  weight=WEIGHTS.get(_field(p, "severity", "medium"), WEIGHTS["medium"]),
                                  explains=tuple(_field(p, "explains", None)
                                                 or meta.get(pid, {}).get("explains") or ())))
    return out


def stored_signatures(session: Session) -> list[KnownSignature]:
    """Every enabled pattern of the knowledge base (SRE-confirmed ones first, as the matcher orders)."""
    rows = session.exec(select(FaultPattern).where(FaultPattern.enabled == True)  # noqa: E712
                        .order_by(FaultPattern.source.desc(), FaultPattern.id)).all()
    return signatures(rows)


@functools.lru_cache(maxsize=1)
def _library() -> tuple[KnownSignature, ...]:
    from kb.library import builtin_patterns

    return tuple(signatures(builtin_patterns()))


def library_signatures() -> list[KnownSignature]:
    """The shipped library's patterns (all of them: a fresh knowledge base enables every one)."""
    return list(_library())
