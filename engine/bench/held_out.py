"""Which corpus a labelled case belongs to, and whether a `held_out:` rule of a learner's settings
(data/stage_learn.yaml, data/root_learn.yaml) keeps it out of training and cross-validation."""

from __future__ import annotations

from collections.abc import Sequence

# the corpora a case's truth.json `source` names by its prefix (`realrun/…`, `othergen3/…`); a case
# with no source is a generated (synthetic) one, any other source a public thread
CORPORA = ("public", "realrun", "othergen", "othergen2", "othergen3", "othergen4", "synthetic")
_PREFIXED = tuple(c for c in CORPORA if c not in ("public", "synthetic"))


def corpus_of(truth: dict) -> str:
    source = str(truth.get("source") or "")
    if not source:
        return "synthetic"
    for prefix in _PREFIXED:
        if source.startswith(prefix + "/"):
            return prefix
    return "public"


def held_out(truth: dict, rules: Sequence[dict]) -> bool:
    """A case of a held-out half: its facts (truth.json and its corpus) match every key of a rule."""
    facts = {**truth, "corpus": corpus_of(truth)}
    return any(all(facts.get(k) == v for k, v in rule.items()) for rule in rules)
