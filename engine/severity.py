"""How alarming an event's text is, from the severity lexicon (data/severity.yaml)."""
from __future__ import annotations

import re
from functools import lru_cache

from engine.rules import load


@lru_cache(maxsize=1)
def _lexicon() -> tuple[dict[str, float], list[tuple[float, re.Pattern[str]]],
                        list[tuple[float, re.Pattern[str]]], re.Pattern[str]]:
    data = load("severity")
    terms = [(float(t["w"]), re.compile(t["regex"])) for t in data["terms"]]
    damp = [(float(d["f"]), re.compile(d["regex"])) for d in data["damp"]]
    cascade = re.compile("|".join(f"(?:{c})" for c in data["cascade"]))
    return {k: float(v) for k, v in data["levels"].items()}, terms, damp, cascade


def severity(template: str, level: str | None) -> float:
    """In [0, 1]: the max of the level's weight and the matching terms' weights, damped."""
    levels, terms, damp, _ = _lexicon()
    sev = levels.get(level or "", 0.1)
    for w, rx in terms:
        if w > sev and rx.search(template):
            sev = w
    for f, rx in damp:
        if rx.search(template):
            sev *= f
    return sev


def is_cascade(template: str) -> bool:
    """True for known consequences of a fault elsewhere (watchdog timeouts, elastic agent failures...)."""
    return _lexicon()[3].search(template) is not None
