"""Cross-job filtering: events that successful jobs of the same family also log are not failure signs.

Templates of history jobs parsed in the same Drain run as the failed job share its vocabulary and
are compared as text. A knowledge-base pool was learned from *separate* parses, where Drain may have
generalised the same event differently (`<*>` at other positions, a host name or a step number kept
constant in one run and variable in the other), so pool templates are also matched by token-wise
compatibility (`compatible`): there is a line both templates could stand for, and they agree on
enough constant words that an over-general pool template cannot swallow a real failure event.
"""
from __future__ import annotations

import math
import re
from collections.abc import Container, Iterable, Sequence
from functools import lru_cache

from engine.masking import MASK
from engine.model import ParsedJob

MIN_COMMON = 2  # constant tokens a compatible pair must share, at the same positions
COMMON_SHARE = 0.5  # ... and at least this share of the failed template's constant tokens
MIN_COMMON_FOR_MISMATCH = 4  # a pair with one conflicting identifier-like token needs this many
ABSORB_RATIO = 2  # equal constant tokens must outnumber the masked-away ones this many times over
_ZEROS = re.compile("0+")  # parse turns every digit into "0": runs of zeros are numbers


def _glob_overlap(a: str, b: str) -> bool:
    """Whether tokens `a` and `b`, where `<*>` stands for any text, can be the same token: exact
    when one side has no mask; when both have, their constant heads and tails must agree."""
    if MASK not in a:
        return _glob(b).fullmatch(a) is not None
    if MASK not in b:
        return _glob(a).fullmatch(b) is not None
    ha, hb = a.partition(MASK)[0], b.partition(MASK)[0]
    ta, tb = a.rpartition(MASK)[2], b.rpartition(MASK)[2]
    return (ha.startswith(hb) or hb.startswith(ha)) and (ta.endswith(tb) or tb.endswith(ta))


@lru_cache(maxsize=65536)
def _glob(token: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in token.split(MASK)), re.DOTALL)


def _token_fits(a: str, b: str) -> bool:
    """Different tokens that may stand for the same value: a mask on either side, masks inside
    the tokens that overlap, or numbers of a different length (`global_step00` / `global_step0000`)."""
    if a == MASK or b == MASK:
        return True
    if MASK in a or MASK in b:
        return _glob_overlap(a, b)
    return "0" in a and _ZEROS.sub("0", a) == _ZEROS.sub("0", b)


def _identifier(tok: str) -> bool:
    return "0" in tok or MASK in tok


def compatible(failed: str, normal: str) -> bool:
    """Whether the failed job's template `failed` and the pool template `normal` (from another
    parse) are the same event.

    Token by token (same token count): equal, or a mask / a number that fits (see `_token_fits`).
    One conflicting pair of identifier-like tokens (both with a digit or a mask: host names, run
    ids) is tolerated when at least MIN_COMMON_FOR_MISMATCH constant tokens are equal. Guard against
    over-general pool templates: at least MIN_COMMON constant tokens, and COMMON_SHARE of the failed
    template's constant tokens, must be equal at the same positions, and more than ABSORB_RATIO
    times as many as the failed template's constant tokens that the pool template masks — so an
    all-`<*>` template matches nothing, and `[Rank <*>] <*>` does not swallow `[Rank <*>] Segfault`.
    """
    fa, na = failed.split(), normal.split()
    if len(fa) != len(na):
        return False
    return _fits(fa, na)


def _fits(fa: Sequence[str], na: Sequence[str]) -> bool:
    common = conflicts = constants = absorbed = 0
    for a, b in zip(fa, na, strict=True):
        if a != MASK:
            constants += 1
            absorbed += b == MASK
        if a == b:
            common += a != MASK
        elif not _token_fits(a, b):
            if not (_identifier(a) and _identifier(b)):
                return False
            conflicts += 1
            if conflicts > 1:
                return False
    need = _need(constants)
    if conflicts:
        need = max(need, MIN_COMMON_FOR_MISMATCH)
    return common >= need and common > ABSORB_RATIO * absorbed


def _need(constants: int) -> int:
    """Equal constant tokens a compatible pair needs, for a failed template with `constants`."""
    return max(MIN_COMMON, math.ceil(COMMON_SHARE * constants))


class NormalPool(Container[str]):
    """Templates known to be normal: `exact` ones match by text (same parse as the failed job),
    `tolerant` ones (a pool learned from other parses) also by `compatible`.

    Tolerant templates are indexed by (token count, position, constant token); a lookup checks
    only the templates found under its rarest keys (any compatible one must share one of them)."""

    def __init__(self, exact: Iterable[str] = (), tolerant: Iterable[str] = ()) -> None:
        tolerant = set(tolerant)
        self.exact = set(exact) | tolerant
        self.tokens: list[list[str]] = []
        self.index: dict[tuple[int, int, str], list[int]] = {}
        for t in tolerant:
            toks = t.split()
            tid = len(self.tokens)
            self.tokens.append(toks)
            for i, tok in enumerate(toks):
                if tok != MASK:
                    self.index.setdefault((len(toks), i, tok), []).append(tid)

    def __len__(self) -> int:
        return len(self.exact)

    def __contains__(self, template: object) -> bool:
        if not isinstance(template, str):
            return False
        if template in self.exact:
            return True
        if not self.index:
            return False
        toks = template.split()
        keys = [(len(toks), i, tok) for i, tok in enumerate(toks) if tok != MASK]
        spare = len(keys) - _need(len(keys))
        if spare < 0:
            return False
        # a compatible template shares `need` of the keys, so one of the spare + 1 rarest ones
        lists = sorted((self.index.get(k, ()) for k in keys), key=len)[:spare + 1]
        seen: set[int] = set()
        for tids in lists:
            for tid in tids:
                if tid not in seen:
                    seen.add(tid)
                    if _fits(toks, self.tokens[tid]):
                        return True
        return False


def normal_templates(history: Sequence[ParsedJob], extra: Iterable[str] = ()) -> set[str]:
    """Templates seen in any succeeded history job, plus `extra` (e.g. a knowledge-base pool)."""
    normal = set(extra)
    for job in history:
        normal.update(t.template for t in job.templates)
    return normal


def normal_pool(history: Sequence[ParsedJob], pool: Iterable[str] = ()) -> NormalPool:
    """What the failed job is filtered against: `history` parsed with it (matched as text) and a
    knowledge-base `pool` learned from other parses (matched by compatibility as well)."""
    return NormalPool(normal_templates(history), pool)


def candidate_events(parsed: ParsedJob, normal: Container[str]) -> list[int]:
    """Ids of the failed job's events that no normal job shows (all events when there is no history).
    `normal` is a set of template texts or a `NormalPool`."""
    return [i for i, t in enumerate(parsed.templates) if t.template not in normal]
