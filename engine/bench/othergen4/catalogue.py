"""The fourth outsider generator's data: fault kinds (data/kinds.yaml), ordinary lines (data/noise.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).parent / "data"
FRAMEWORKS = ("torch", "paddle", "jax")
STAGES = ("init", "data_loading", "model_loading", "training", "checkpointing", "teardown")
SCOPES = ("rank", "node", "all")
ROLES = ("node", "root", "frames", "precursor", "cascade", "agent")
LEVELS = {"E: ": "ERROR", "W: ": "WARNING", "I: ": "INFO", "F: ": "FATAL"}


@dataclass(frozen=True)
class Kind:
    name: str
    stage: str
    category: str
    scope: str
    wording: dict[str, dict[str, list[str]]]  # framework -> role -> line templates

    @property
    def frameworks(self) -> tuple[str, ...]:
        return tuple(f for f in FRAMEWORKS if f in self.wording)


def _load(name: str) -> dict:
    import yaml

    data = yaml.safe_load((DATA / name).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError(f"{DATA / name}: not version 1")
    return data


@cache
def kinds() -> dict[str, Kind]:
    """Every fault kind, by name (file order)."""
    out = {}
    for name, d in _load("kinds.yaml")["kinds"].items():
        if d["stage"] not in STAGES or d["scope"] not in SCOPES:
            raise ValueError(f"kind {name}: bad stage or scope")
        wording = {f: {r: list(d[f].get(r, [])) for r in ROLES} for f in FRAMEWORKS if f in d}
        out[name] = Kind(name, d["stage"], d["category"], d["scope"], wording)
    return out


@cache
def noise() -> dict:
    """Ordinary lines per framework family, and node (kernel, system) lines."""
    return _load("noise.yaml")


def split_level(template: str) -> tuple[str | None, str]:
    """("ERROR", body) for a template tagged "E: ", (None, template) for a raw line."""
    for tag, level in LEVELS.items():
        if template.startswith(tag):
            return level, template[len(tag) :]
    return None, template
