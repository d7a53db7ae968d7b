"""How alarming an event's text is, from the severity lexicon (data/severity.yaml)."""
from __future__ import annotations

import re
from functools import lru_cache

from engine.rules import load


@lru_cache(maxsize=1)
def _lexicon() -> tuple[dict[str, float], list[tuple[float, re.Pattern[str]]],
                        list[tuple[float, re.Pattern[str]]], re.Pattern[str], float]:
    data = load("severity")
    terms = [(float(t["w"]), re.compile(t["regex"])) for t in data["terms"]]
    damp = [(float(d["f"]), re.compile(d["regex"])) for d in data["damp"]]
    cascade = re.compile("|".join(f"(?:{c})" for c in data["cascade"]))
    levels = {k: float(v) for k, v in data["levels"].items()}
    return levels, terms, damp, cascade, float(data["informational_cap"])


def severity(template: str, level: str | None) -> float:
    """In [0, 1]: the max of the level's weight and the matching terms' weights, damped."""
    levels, terms, damp, _, cap = _lexicon()
    sev = levels.get(level or "", 0.1)
    for w, rx in terms:
        if w > sev and rx.search(template):
            sev = w
    if level in ("INFO", "DEBUG"):
        sev = min(sev, cap)
    for f, rx in damp:
        if rx.search(template):
            sev *= f
    return sev


def damped(template: str) -> bool:
    """Some damping rule of the lexicon matches (a traceback's frame, a retry, a settings dump...)."""
    return any(rx.search(template) for _, rx in _lexicon()[2])


def is_cascade(template: str) -> bool:
    """True for known consequences of a fault elsewhere (watchdog timeouts, elastic agent failures...)."""
    return _lexicon()[3].search(template) is not None
