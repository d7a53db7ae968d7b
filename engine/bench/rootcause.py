"""Whether a reported event shows the root cause of a labeled real case (truth `root_lines`).

An event *shows* a root line when
  1. one of its example lines is that root line, verbatim; or
  2. its template fits the root line: the root line is header-stripped and masked the way the
     parser treats every line (`engine.headers.parse_header`, `engine.masking.mask`), and the
     template, read as a pattern in which each `<*>` stands for any text and each run of blank
     space for any run of blank space, matches that masked message (or the unmasked message) as a
     whole. Only a template with a constant word of at least three letters counts this way, so
     that "<*>" or "<*> <*>" shows nothing.

(2) is needed because an event keeps at most three example lines: the root line of rank 5 is
the same event as the lines of ranks 0-2 that were kept. The root is *first* when the first
reported event shows a root line, *among the first k* when one of the first k does.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from engine.headers import parse_header
from engine.masking import MASK, mask

_WORD = re.compile(r"[A-Za-z]{3,}")


@lru_cache(maxsize=1 << 14)
def _pattern(template: str) -> re.Pattern[str] | None:
    tokens = template.split()
    if not any(_WORD.search(part) for tok in tokens for part in tok.split(MASK)):
        return None
    body = r"\s+".join(".*?".join(re.escape(p) for p in tok.split(MASK)) for tok in tokens)
    return re.compile(body, re.S)


@lru_cache(maxsize=1 << 14)
def _messages(line: str) -> tuple[str, str]:
    message = parse_header(line).message
    return mask(message), message


def template_fits(template: str, line: str) -> bool:
    """Rule (2) above: `template` fits the raw log line `line`."""
    rx = _pattern(template)
    return rx is not None and any(rx.fullmatch(m) for m in _messages(line))


def shows_root(template: str, examples: Sequence[str], root_lines: Sequence[str]) -> bool:
    roots = set(root_lines)
    return any(x in roots for x in examples) or any(template_fits(template, r) for r in root_lines)


def root_rank(events: Sequence[tuple[str, Sequence[str]]], root_lines: Sequence[str]) -> int | None:
    """1-based position of the first of `events` ((template, examples) pairs) that shows a root line."""
    for i, (template, examples) in enumerate(events, start=1):
        if shows_root(template, examples, root_lines):
            return i
    return None
