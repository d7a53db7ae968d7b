"""Match a job's log events against every enabled fault pattern in one pass per line.

All signature entries of all patterns go into one RE2 ``Set``; each raw line (template
example) is scanned once and the set reports every entry that matches. RE2 runs in linear time,
so no signature can make matching hang, whatever an SRE typed in.

Ranking: root causes before cascades; then a match that another match explains (library
``explains`` data: an Xid before the NCCL error it caused, a host OOM before the SIGKILL, a full
disk before the checkpoint exception) after the one that explains it; then severity (critical >
high > medium > low), the earliest evidence, library order.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import re2
from sqlmodel import Session, select

from engine.model import Match, TemplateStat
from kb import KbError
from kb.models import FaultPattern
from kb.signatures import compile_re2, entry_regex, normalize_signature, re2_options

SEVERITY_RANK = {"critical": 0, "high": 1, "medium": 2, "low": 3}
KIND_RANK = {"root": 0, "cascade": 1}
MAX_EVIDENCE = 3
MAX_LINE_CHARS = 65536


@dataclass
class _Pattern:
    id: str
    title: str
    category: str
    remediation: str
    kind: str
    severity: str
    explains: tuple[str, ...] = ()

    def explains_id(self, other: str) -> bool:
        """Whether this pattern's ``explains`` names ``other`` (exact id or ``prefix-*``)."""
        return any(other.startswith(e[:-1]) if e.endswith("*") else other == e for e in self.explains)


def _explains_of(p: Any, pid: str) -> tuple[str, ...]:
    """A pattern's explains list: its own field if it has one, else the built-in library's."""
    own = _field(p, "explains")
    if own is not None:
        return tuple(own)
    from kb.library import library_meta

    return tuple(library_meta().get(pid, {}).get("explains") or ())


@dataclass
class _Hit:
    pattern: int
    first: tuple = ()
    count: int = 0
    evidence: list[str] = field(default_factory=list)


def _field(p: Any, name: str, default: Any = None) -> Any:
    return p.get(name, default) if isinstance(p, dict) else getattr(p, name, default)


class Matcher:
    """Compiled matcher over ``patterns`` (FaultPattern rows or dicts with the same fields).

    Disabled patterns are skipped. Raises KbError if a signature does not compile under RE2.
    """

    def __init__(self, patterns: Iterable[Any]) -> None:
        self.patterns: list[_Pattern] = []
        self._owner: list[int] = []  # set entry index -> pattern index
        self._set = re2.Set.SearchSet(re2_options())
        for p in patterns:
            if not _field(p, "enabled", True):
                continue
            idx = len(self.patterns)
            pid = _field(p, "id")
            for entry in normalize_signature(_field(p, "signature")):
                try:
                    n = self._set.Add(entry_regex(entry))
                except re2.error:
                    try:
                        compile_re2(entry_regex(entry))  # RE2's reason (the set gives none)
                    except KbError as exc:
                        raise KbError(f"{pid}: {exc}") from None
                    raise KbError(f"{pid}: signature does not compile under RE2") from None
                assert n == len(self._owner)
                self._owner.append(idx)
            self.patterns.append(_Pattern(
                id=pid, title=_field(p, "title", pid), category=_field(p, "category", ""),
                remediation=_field(p, "remediation", "") or "", kind=_field(p, "kind", "root"),
                severity=_field(p, "severity", "medium"), explains=_explains_of(p, pid)))
        self._compiled = bool(self._owner)
        if self._compiled:
            try:
                self._set.Compile()
            except re2.error as exc:
                raise KbError(f"could not compile the pattern set: {exc}") from None

    def __len__(self) -> int:
        return len(self.patterns)

    def scan(self, line: str) -> set[int]:
        """Indices (into ``self.patterns``) of the patterns whose signature matches ``line``."""
        if not self._compiled:
            return set()
        found = self._set.Match(line[:MAX_LINE_CHARS])  # None when nothing matches
        return {self._owner[i] for i in found} if found else set()

    def _hit(self, hits: dict[int, _Hit], idx: int, first: tuple, count: int, line: str) -> None:
        h = hits.get(idx)
        if h is None:
            h = hits[idx] = _Hit(idx, first)
        elif first < h.first:
            h.first = first
        h.count += count
        if len(h.evidence) < MAX_EVIDENCE and line not in h.evidence:
            h.evidence.append(line)

    def _explained_depth(self, hits: dict[int, _Hit]) -> dict[int, int]:
        """For each hit: 0 if no other hit explains it, else 1 + the depth of its deepest explainer
        (an explanation chain; cycles count once)."""
        ids = {i: self.patterns[i].id for i in hits}
        explainers = {i: [j for j in hits if j != i and self.patterns[j].explains_id(ids[i])] for i in hits}
        depth: dict[int, int] = {}

        def walk(i: int, seen: frozenset[int]) -> int:
            if i not in depth:
                above = [walk(j, seen | {i}) for j in explainers[i] if j not in seen]
                depth[i] = 1 + max(above) if explainers[i] and above else (1 if explainers[i] else 0)
            return depth[i]

        for i in hits:
            walk(i, frozenset())
        return depth

    def _result(self, hits: dict[int, _Hit]) -> list[Match]:
        depth = self._explained_depth(hits)

        def key(h: _Hit) -> tuple:
            p = self.patterns[h.pattern]
            return (KIND_RANK.get(p.kind, 1), depth[h.pattern], SEVERITY_RANK.get(p.severity, 9),
                    h.first, h.pattern)

        out = []
        for h in sorted(hits.values(), key=key):
            p = self.patterns[h.pattern]
            out.append(Match(pattern_id=p.id, title=p.title, category=p.category,
                             remediation=p.remediation, evidence=list(h.evidence), kind=p.kind))
        return out

    def match_lines(self, lines: Iterable[str]) -> list[Match]:
        """Match raw log lines; evidence = up to 3 matching lines per pattern, in input order."""
        hits: dict[int, _Hit] = {}
        for n, raw in enumerate(lines):
            line = raw.rstrip("\r\n")
            for idx in self.scan(line):
                self._hit(hits, idx, ("", n), 1, line)
        return self._result(hits)

    def match_templates(self, templates: list[TemplateStat]) -> list[Match]:
        """Match a parsed job's templates through their raw examples (the template text itself
        when a template has none); evidence = the matching raw examples, at most 3."""
        hits: dict[int, _Hit] = {}
        for n, t in enumerate(templates):
            first = (t.first_seen or "\uffff", n)
            seen: set[int] = set()
            for line in (t.examples or [t.template]):
                for idx in self.scan(line):
                    self._hit(hits, idx, first, 0 if idx in seen else max(t.count, 1), line)
                    seen.add(idx)
        return self._result(hits)


def load_matcher(session: Session) -> Matcher:
    """A matcher over every enabled pattern (SRE-confirmed ones first on equal rank)."""
    rows = session.exec(select(FaultPattern).where(FaultPattern.enabled == True)  # noqa: E712
                        .order_by(FaultPattern.source.desc(), FaultPattern.id)).all()
    return Matcher(rows)
