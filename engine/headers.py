"""Header extraction: timestamp, level and rank from the common shapes of training-log lines."""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from engine.rules import load

_MONTHS = {m: i for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], start=1)}


@dataclass(frozen=True)
class Header:
    ts: str | None  # ISO-8601 (UTC assumed), seconds resolution or finer
    level: str | None  # DEBUG | INFO | WARN | ERROR | FATAL
    rank: int | None
    message: str


@lru_cache(maxsize=1)
def _rules() -> tuple[list[re.Pattern[str]], dict[str, str], list[tuple[str, re.Pattern[str]]]]:
    data = load("headers")
    prefixes = [re.compile(p["regex"]) for p in data["prefixes"]]
    levels = {str(k): str(v) for k, v in data["levels"].items()}
    msg_levels = [(m["level"], re.compile(m["regex"])) for m in data["message_levels"]]
    return prefixes, levels, msg_levels


def _norm_level(raw: str, levels: dict[str, str]) -> str:
    up = raw.upper()
    return levels.get(raw, levels.get(up, up))


def _iso(g: dict[str, str | None], year: int) -> str | None:
    time = g.get("time")
    if not time:
        return None
    time = time.replace(",", ".")
    if g.get("date"):
        return f"{g['date']}T{time}"
    if g.get("gmon"):
        return f"{year:04d}-{g['gmon']}-{g['gday']}T{time}"
    if g.get("mon") in _MONTHS:
        return f"{year:04d}-{_MONTHS[g['mon']]:02d}-{int(g['day'] or 1):02d}T{time}"
    return None  # a time of day alone does not order lines across days


def _prefix_matches(text: str) -> Iterator[tuple[re.Match[str], int]]:
    """The known header prefixes at the start of `text`, one after another (at most 6): each match
    with the offset in `text` of the string it was matched against."""
    prefixes = _rules()[0]
    base = 0
    for _ in range(6):
        rest = text[base:]
        for rx in prefixes:
            m = rx.match(rest)
            if m is not None:
                break
        else:
            return
        yield m, base
        if m.end() == 0:
            return
        base += m.end()


def parse_header(line: str, year: int = 1970) -> Header:
    """Strip the known prefixes of `line`; `year` completes timestamps that carry none (glog, syslog)."""
    _, levels, msg_levels = _rules()
    ts: str | None = None
    level: str | None = None
    rank: int | None = None
    end = 0
    for m, base in _prefix_matches(line):
        g = m.groupdict()
        if g.get("rank") is not None and rank is None:
            rank = int(g["rank"])
        if g.get("level") and level is None:
            level = _norm_level(g["level"], levels)
        if ts is None:
            ts = _iso(g, year)
        end = base + m.end()
    message = line[end:].strip()
    if level is None or level == "INFO":
        for lv, rx in msg_levels:
            if rx.search(message):
                level = lv
                break
    return Header(ts=ts, level=level, rank=rank, message=message)


_ZERO_DIGITS = str.maketrans("0123456789", "0000000000")
_TS_GROUPS = ("date", "time", "gmon", "gday", "mon", "day")
Layout = tuple[tuple[str, int, int], ...]  # (timestamp group, start, end) in the line


@lru_cache(maxsize=1 << 16)
def _ts_layout(key: str) -> Layout | None:
    """Where `parse_header` finds the timestamp in lines shaped like `key` (digits as "0"), if it does.

    Prefix regexes treat every digit alike, so all lines with one pre-key match the same prefixes at
    the same offsets: the header is parsed once per pre-key, and each line's timestamp is sliced out."""
    for m, base in _prefix_matches(key):
        g = m.groupdict()
        if _iso(g, 1970) is not None:
            return tuple((name, base + m.start(name), base + m.end(name))
                         for name in _TS_GROUPS if g.get(name) is not None)
    return None


def timestamp(line: str, year: int = 1970, key: str | None = None) -> str | None:
    """`parse_header(line, year).ts`, fast for lines whose pre-key (`key`, digits as "0") was seen."""
    layout = _ts_layout(key if key is not None else line.translate(_ZERO_DIGITS))
    if layout is None:
        return None
    g: dict[str, str | None] = {name: line[a:b] for name, a, b in layout}
    return _iso(g, year)

