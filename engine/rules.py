"""Loads the engine's versioned data files (masking, headers, stages, iterations, severity)."""
from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import Any

import yaml


@cache
def load(name: str) -> dict[str, Any]:
    """The parsed YAML data file `engine/data/<name>.yaml`."""
    text = resources.files("engine").joinpath("data").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "version" not in data:
        raise ValueError(f"engine data file {name}.yaml has no version")
    return data


@cache
def compiled(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def size_text(n: int) -> str:
    """A byte count for messages: "64 MiB", "512 KiB", "100 bytes"."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} bytes"
