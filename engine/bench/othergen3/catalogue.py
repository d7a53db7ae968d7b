"""The generator's YAML data: fault kinds (data/faults.yaml) and normal wording (data/wording.yaml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

DATA = Path(__file__).parent / "data"
STAGES = ("init", "data_loading", "model_loading", "training", "checkpointing", "teardown")
WHERE = (
    "faulty_rank",
    "all_ranks",
    "other_ranks",
    "other_node_leads",
    "faulty_kernel",
    "faulty_agent",
    "launcher",
)
LABELS = ("root", "indicating", "context", "cascade")


@dataclass(frozen=True)
class Group:
    where: str
    label: str
    lines: tuple[str, ...]
    key: str | None = None
    dt: float = 0.0
    repeat: int = 1
    shapes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Kind:
    name: str
    stage: str
    category: str
    shapes: tuple[str, ...]
    at: str | float
    groups: tuple[Group, ...]
    sources: tuple[str, ...] = ()
    stop: str = "all"
    slow: bool = False
    extra: dict = field(default_factory=dict)


def _group(kind: str, raw: dict) -> Group:
    g = Group(
        where=raw["where"],
        label=raw["label"],
        lines=tuple(raw["lines"]),
        key=raw.get("key"),
        dt=float(raw.get("dt", 0.0)),
        repeat=int(raw.get("repeat", 1)),
        shapes=tuple(raw.get("shapes", ())),
    )
    if g.where not in WHERE or g.label not in LABELS:
        raise ValueError(f"faults.yaml {kind}: bad where/label {g.where!r}/{g.label!r}")
    if g.label in ("root", "indicating") and not g.key:
        raise ValueError(f"faults.yaml {kind}: a {g.label} group needs a key")
    return g


@lru_cache(maxsize=1)
def kinds() -> dict[str, Kind]:
    raw = yaml.safe_load((DATA / "faults.yaml").read_text())["kinds"]
    out = {}
    for name, k in raw.items():
        if k["stage"] not in STAGES:
            raise ValueError(f"faults.yaml {name}: unknown stage {k['stage']!r}")
        out[name] = Kind(
            name=name,
            stage=k["stage"],
            category=k["category"],
            shapes=tuple(k["shapes"]),
            at=k["at"],
            groups=tuple(_group(name, g) for g in k["groups"]),
            sources=tuple(k.get("sources", ())),
            stop=k.get("stop", "all"),
            slow=bool(k.get("slow", False)),
        )
    return out


@lru_cache(maxsize=1)
def wording() -> dict:
    return yaml.safe_load((DATA / "wording.yaml").read_text())
