"""Severity learned from labelled root lines: what a root line says and how it is shaped, across frameworks.

The severity lexicon (data/severity.yaml) knows the words of the failures it was written from; a root
line in other wording ("Attempt to free invalid pointer", "server not responding") weighs 0.1 there and
stays under the selection floor. `shape` describes a template by its words and its shape (an exception
head, a negation, a source location, its level, the lexicon's own weight); `LiftModel` is a logistic
regression over those features, fitted on the development corpora's candidates (root line or not) by
`l4 bench root-model severity-cv` (engine/bench/severity_learn.py) and checked on left-out groups. It has
no file: left out, it put no more roots first on any development corpus (README, w8-rootsel), so the
engine runs without one. Given a model (`score_events(..., lift=model)`, what `severity-cv` does), a
candidate with no role that the model finds likely (p >= its threshold) weighs at least the model's
`lift`; it never lowers a severity.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from engine.masking import MASK
from engine.model import TemplateStat
from engine.severity import damped

MODEL_VERSION = 1
_WORDS = re.compile(r"[a-z]{3,}")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_EXC_HEAD = re.compile(r"^[\w.]*(?:Error|Exception|Exit|Fault|Failure|Interrupt|Abort)\w*\b:?")
_NEGATION = re.compile(r"\b(?:not|no|cannot|can't|unable|invalid|unexpected|couldn't|never|refused|unknown|"
                       r"missing|bad|illegal|unsupported|lost|denied|expected)\b", re.I)
_SOURCE_AT = re.compile(r"\b[\w/.-]+\.(?:cc|cpp|cu|c|h|hpp|py|rs|go):(?:\d+\b|<\*>)")
_KV = re.compile(r"^\s*\w+\s*[:=]\s+\S")
_STATUS = re.compile(r"\b(?:exit(?:ed)?|status|code|signal|rc)\b", re.I)

def shape(template: str, level: str | None, lexicon: float) -> dict[str, float]:
    """The features of a template: its words (lower case, camel case split, each once) and its shape."""
    text = template.replace(MASK, " ")
    words = {w for w in _WORDS.findall(_CAMEL.sub(" ", text).lower())}
    tokens = template.split()
    f: dict[str, float] = {f"w={w}": 1.0 for w in words}
    f.update({
        f"level={level or 'none'}": 1.0, "lexicon": lexicon, "lexicon_severe": float(lexicon >= 0.6),
        "exc_head": float(bool(_EXC_HEAD.match(template.lstrip()))),
        "negation": float(bool(_NEGATION.search(text))),
        "source_at": float(bool(_SOURCE_AT.search(template))),
        "kv": float(bool(_KV.match(template))), "status": float(bool(_STATUS.search(text))),
        "log_tokens": math.log10(1 + len(tokens)),
        "masked_share": sum(MASK in t for t in tokens) / max(1, len(tokens)),
        "ends_colon": float(template.rstrip().endswith(":")), "no_words": float(not words),
    })
    return f


@dataclass(frozen=True)
class LiftModel:
    version: int
    weights: dict[str, float]
    bias: float
    threshold: float  # p at or above which a candidate is lifted
    lift: float  # ... to at least this severity

    def probability(self, f: dict[str, float]) -> float:
        z = self.bias + sum(self.weights.get(k, 0.0) * v for k, v in f.items())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def severity(self, template: str, level: str | None, lexicon: float) -> float:
        """The lifted severity of a template (0.0 when the model does not find it a likely root)."""
        if level in ("INFO", "DEBUG") or lexicon >= self.lift:
            return 0.0  # a line its program logged as routine stays capped; a severe one needs no lift
        return self.lift if self.probability(shape(template, level, lexicon)) >= self.threshold else 0.0

    def to_dict(self) -> dict:
        return {"version": self.version, "threshold": self.threshold, "lift": self.lift, "bias": self.bias,
                "weights": dict(sorted(self.weights.items()))}


def model_from_dict(d: dict) -> LiftModel:
    if int(d.get("version", 0)) != MODEL_VERSION:
        raise ValueError(f"root severity model version {d.get('version')!r}, expected {MODEL_VERSION}")
    return LiftModel(MODEL_VERSION, {k: float(v) for k, v in d["weights"].items()}, float(d["bias"]),
                     float(d["threshold"]), float(d["lift"]))


NO_LIFT = LiftModel(MODEL_VERSION, {}, 0.0, 2.0, 0.0)  # lifts nothing (the lexicon alone)


def learned_severity(template: TemplateStat, severity: float, model: LiftModel | None) -> float:
    """The severity `model` gives a candidate beyond `severity` (0.0: none, and always without a model):
    only a line that no damping rule of the lexicon matched (frames, retries, dumps stay where they are)."""
    if model is None or model.threshold > 1.0 or damped(template.template):
        return 0.0
    return model.severity(template.template, template.level, severity)
