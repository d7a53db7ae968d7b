"""Structured log lines: one JSON object per line (journald `-o json`, Docker's json-file driver,
structlog / python-json-logger, GCP, pino / bunyan, loguru `serialize=True`).

`read` finds the record's message, time, level and rank by the field names of the `json` section of
engine/data/headers.yaml; `engine.headers` turns the time into the engine's UTC stamp and reads the
message's own header. A line that is not a JSON object with a known message field is not a record
(None): it is read as text. Lines are tested with a cheap look at their first character first, so
text lines cost nothing.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from engine.rules import compiled, load

Time = tuple[str, float] | tuple[str, str]  # ("epoch", seconds) | ("iso", text)


@dataclass(frozen=True)
class Record:
    message: str
    time: Time | None
    level: str | None  # DEBUG | INFO | WARN | ERROR | FATAL
    rank: int | None


@dataclass(frozen=True)
class _Rules:
    message: tuple[str, ...]
    exception: tuple[str, ...]
    time: tuple[str, ...]
    level: tuple[tuple[str, dict[int, str] | None], ...]
    rank: tuple[str, ...]
    names: dict[str, str]
    epoch: tuple[float, float]  # seconds since 1970 the stamps must fall in
    exception_line: re.Pattern[str]
    traceback: re.Pattern[str]


@lru_cache(maxsize=1)
def _rules() -> _Rules:
    data = load("headers")
    js = data["json"]
    schemes = {name: {int(k): str(v) for k, v in m.items()} for name, m in js["numbers"].items()}
    names = {str(k).upper(): str(v) for k, v in data["levels"].items()}
    names.update({str(k).upper(): str(v) for k, v in js["level_names"].items()})
    lo, hi = js["epoch_years"]
    return _Rules(
        message=tuple(js["message"]), exception=tuple(js["exception"]), time=tuple(js["time"]),
        level=tuple((e["field"], schemes[e["numbers"]] if e.get("numbers") else None) for e in js["level"]),
        rank=tuple(str(r) for r in js["rank"]), names=names,
        epoch=((lo - 1970) * 365.2425 * 86400, (hi - 1970) * 365.2425 * 86400),
        exception_line=re.compile(js["exception_line"]), traceback=re.compile(js["traceback"]))


def may_be_record(text: str) -> bool:
    """Whether `text` (a line without its header) can be a JSON object with fields: it starts with
    '{"' (spaces allowed). One look at its first character for most text lines."""
    head = text[:1]
    return (head == "{" or head.isspace()) and _START.match(text) is not None


_START = re.compile(r'\s*\{\s*"')


def read(text: str) -> Record | None:
    """The record of `text` when it is a JSON object with a message field of the known names, else None."""
    if not may_be_record(text):
        return None
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # not JSON (a Python dict's repr, a line cut short), too deep
        return None
    if not isinstance(obj, dict):
        return None
    rules = _rules()
    message = None
    for path in rules.message:
        message = _text(_get(obj, path))
        if message is not None:
            break
    if message is None:
        return None
    for path in rules.exception:
        exc = _text(_get(obj, path))
        if exc and exc.strip():
            message = f"{message}\n{exc}"
            break
    return Record(message=one_line(message), time=_time(obj, rules), level=_level(obj, rules),
                  rank=_rank(obj, rules))


def one_line(message: str) -> str:
    """The one line the engine reads of a message of several: its first line, then after ": " the
    exception line a Python traceback ends with; a message that is only a traceback gives that line."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else ""
    first, last = lines[0], lines[-1]
    rules = _rules()
    if not rules.exception_line.match(last):
        return first
    if rules.traceback.match(first):
        return last
    return f"{first}: {last}"


def _get(obj: dict[str, Any], path: str) -> Any:
    if path in obj:
        return obj[path]
    if "." not in path:
        return None
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _text(value: Any) -> str | None:
    """A message value: a string, or journald's array of bytes (a message that is not UTF-8)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", "replace")
    return None


def _time(obj: dict[str, Any], rules: _Rules) -> Time | None:
    for path in rules.time:
        value = _get(obj, path)
        if isinstance(value, dict) and "seconds" in value:  # a protobuf Timestamp
            try:
                value = float(value["seconds"]) + float(value.get("nanos") or 0) / 1e9
            except (TypeError, ValueError):
                continue
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, str):
            v = value.strip()
            if v.isdigit() or _DECIMAL.fullmatch(v):
                value = float(v)
            elif v[:4].isdigit() and v[4:5] == "-":
                return ("iso", v)
            else:
                continue
        if isinstance(value, int | float):
            seconds = _epoch_seconds(float(value), rules.epoch)
            if seconds is not None:
                return ("epoch", seconds)
    return None


_DECIMAL = compiled(r"\d+\.\d+")


def _epoch_seconds(value: float, bounds: tuple[float, float]) -> float | None:
    """`value` read as seconds, milliseconds, microseconds or nanoseconds since 1970: the one unit that
    puts it within `bounds` (the units are 1000 apart, the bounds span less)."""
    for unit in (1.0, 1e3, 1e6, 1e9):
        s = value / unit
        if bounds[0] <= s <= bounds[1]:
            return s
    return None


def _level(obj: dict[str, Any], rules: _Rules) -> str | None:
    for path, numbers in rules.level:
        value = _get(obj, path)
        if isinstance(value, str) and value.strip().isdigit() and numbers is not None:
            value = int(value.strip())
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float) and numbers is not None:
            below = [k for k in numbers if k <= value]
            if below:
                return numbers[max(below)]
        elif isinstance(value, str) and value.strip():
            up = value.strip().upper()
            level = rules.names.get(up, up if up in _LEVELS else None)
            if level:
                return level
    return None


_LEVELS = ("DEBUG", "INFO", "WARN", "ERROR", "FATAL")


def _rank(obj: dict[str, Any], rules: _Rules) -> int | None:
    for path in rules.rank:
        value = _get(obj, path)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and 0 <= value < 1 << 31:
            return value
        if isinstance(value, str) and value.isdigit() and len(value) < 10:
            return int(value)
    return None
