"""The second outsider generator's data: the fault catalogue and the normal wording (YAML in data/)."""

from __future__ import annotations

from pathlib import Path

import yaml

DATA = Path(__file__).parent / "data"


def _load(name: str) -> dict:
    return yaml.safe_load((DATA / name).read_text(encoding="utf-8"))


WORDING: dict = _load("wording.yaml")
FAULTS: list[dict] = _load("faults.yaml")["faults"]
KINDS: tuple[str, ...] = tuple(f["kind"] for f in FAULTS)
STAGES: tuple[str, ...] = ("init", "data_loading", "model_loading", "training", "checkpointing", "teardown")
