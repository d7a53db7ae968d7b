"""Masking of variable tokens (timestamps, hex, IPs, numbers, paths, shapes, rank ids) before Drain."""
from __future__ import annotations

import re
from functools import lru_cache

from engine.rules import load

MASK = "<*>"
_COLLAPSE = re.compile(r"(?:<\*>[,:/.x-]*){2,}<\*>")  # within one token: token counts stay


@lru_cache(maxsize=1)
def _combined() -> re.Pattern[str]:
    masks = load("masking")["masks"]
    return re.compile("|".join(f"(?:{m['regex']})" for m in masks))


def mask(message: str) -> str:
    """`message` with every variable token replaced by `<*>` (runs of masks collapse into one)."""
    out = _combined().sub(MASK, message)
    if out.count(MASK) > 1:
        out = _COLLAPSE.sub(MASK, out)
    return out
