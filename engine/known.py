"""Known fault signatures as evidence for the ranking: what a library says a line is.

The knowledge base holds fault patterns (its built-in library and the SREs' confirmed ones); the
engine knows nothing of it. A caller hands the engine plain `KnownSignature`s and the ranking reads
a match as severity and role evidence (`engine.events`), in three ways, each only for an event the
engine's own roles left as a possible root cause:
- a *root* signature lifts the event's severity to the signature's weight (a kernel's
  "nfs: server … not responding" says what broke without an error word);
- a *consequence* signature (`root=False`) makes the event a cascade (a peer's reset connection);
- a root signature that another signature matched in the same job *explains* (an Xid 79 explains
  the CUDA and NCCL errors after it) makes the explained event a cascade of the explaining one,
  when the explaining line was logged first (both on the clock: the library's `explains` is a
  family-wide guess, the order in time is this job's word).
Regexes run under RE2 (linear time, whatever an SRE typed in); one that does not compile is skipped.
With no signatures nothing changes.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import re2

from engine.model import ParsedJob

MAX_LINE_CHARS = 65536


@dataclass(frozen=True)
class KnownSignature:
    id: str
    regexes: tuple[str, ...]  # any of them matching a raw line (or a template) is a match
    root: bool = True  # False: the line is a consequence of a fault elsewhere
    weight: float = 0.9  # the severity a root match gives its event, in [0, 1]
    explains: tuple[str, ...] = ()  # ids this one is the root of; "prefix-*" names a family

    def explains_id(self, other: str) -> bool:
        return any(other.startswith(e[:-1]) if e.endswith("*") else other == e for e in self.explains)


@dataclass
class KnownEvidence:
    lift: dict[int, float] = field(default_factory=dict)  # event id -> severity at least
    consequence: set[int] = field(default_factory=set)  # events a signature calls a consequence
    explained: set[int] = field(default_factory=set)  # of those, the ones another match explains
    signature: dict[int, str] = field(default_factory=dict)  # event id -> the id of its best signature


def _options() -> re2.Options:
    opts = re2.Options()
    opts.max_mem = 64 << 20
    opts.log_errors = False
    return opts


class _Set:
    """All signatures' regexes in one RE2 set: one scan per line."""

    def __init__(self, known: Sequence[KnownSignature]) -> None:
        self.owner: list[int] = []
        self.rx = re2.Set.SearchSet(_options())
        for k, sig in enumerate(known):
            for pattern in sig.regexes:
                try:
                    self.rx.Add(pattern)
                except re2.error:
                    continue  # not RE2: the caller's matcher reports it; the ranking does without
                self.owner.append(k)
        if self.owner:
            self.rx.Compile()

    def scan(self, line: str) -> set[int]:
        if not self.owner:
            return set()
        found = self.rx.Match(line[:MAX_LINE_CHARS])
        return {self.owner[i] for i in found} if found else set()


@lru_cache(maxsize=4)
def _compiled(known: tuple[KnownSignature, ...]) -> _Set:
    """One compiled set per list of signatures (compiling a library's takes a good part of a second)."""
    return _Set(known)


def known_evidence(parsed: ParsedJob, candidates: Sequence[int],
                   known: Sequence[KnownSignature]) -> KnownEvidence:
    """Which candidate events the signatures match, and what that makes them (see the module doc)."""
    out = KnownEvidence()
    if not known:
        return out
    known = tuple(known)
    matcher = _compiled(known)
    hits: dict[int, set[int]] = {}
    for i in candidates:
        t = parsed.templates[i]
        found: set[int] = set()
        for line in (*t.examples, t.template):
            found |= matcher.scan(line)
        if found:
            hits[i] = found
    out.explained = _explained(parsed, hits, known)
    for i, found in hits.items():
        roots = [k for k in found if known[k].root]
        if roots and i not in out.explained:
            best = max(roots, key=lambda k: (known[k].weight, -k))
            out.lift[i] = max(0.0, min(1.0, known[best].weight))
            out.signature[i] = known[best].id
        else:
            out.consequence.add(i)
            out.signature[i] = known[min(found)].id
    return out


def _explained(parsed: ParsedJob, hits: dict[int, set[int]], known: Sequence[KnownSignature]) -> set[int]:
    """Events whose every signature another event's explains (and not the other way round), that
    other event logged no later than this one: cause before effect, both on the clock."""
    out = set()
    for i, found in hits.items():
        ti = parsed.templates[i].first_seen
        if not ti:
            continue
        for j, other in hits.items():
            tj = parsed.templates[j].first_seen
            if j == i or not tj or tj > ti:
                continue
            if all(any(known[b].explains_id(known[a].id) and not known[a].explains_id(known[b].id)
                       for b in other if b != a) for a in found):
                out.add(i)
                break
    return out
