"""Header extraction: timestamp, level and rank from the common shapes of training-log lines.

Launcher prefixes (torchrun's `[rank3]:`, mpirun's `[1,0]<stderr>:`, `srun -l`'s `0: `, pdsh's
`host: `) are stripped before or after a timestamp, and give the rank. Every timestamp is made
timezone-aware and returned in UTC as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (fixed width, so the strings
sort in time order): an offset in the line is honoured; a naive stamp is read in the zone named by
`L4_LOG_TZ` (default UTC); a stamp without a year (glog, syslog) takes the `year` given (the job's
year is settled afterwards from its other stamps, see `engine.clock`). A file's own line decoration
(a paste's `> ` quote, a line-number gutter, a tag on every line: `engine.decoration`) is stripped
first when it is given. A structured line (one JSON object, at the start or after the prefixes:
`engine.jsonlog`) gives its record's message, stamp, level and rank.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from engine import jsonlog
from engine.decoration import Decoration, strip
from engine.rules import load

_MONTHS = {m: i for i, m in enumerate(
    ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], start=1)}
TZ_ENV = "L4_LOG_TZ"
MAX_PREFIXES = 6


@dataclass(frozen=True)
class Header:
    ts: str | None  # ISO-8601 in UTC, `YYYY-MM-DDTHH:MM:SS.ffffffZ`
    level: str | None  # DEBUG | INFO | WARN | ERROR | FATAL
    rank: int | None
    message: str


@dataclass(frozen=True)
class _Prefix:
    rx: re.Pattern[str]
    first: bool  # only at the start of the line or right after a timestamp


@lru_cache(maxsize=1)
def _rules() -> tuple[list[_Prefix], dict[str, str], list[tuple[str, re.Pattern[str]]]]:
    data = load("headers")
    prefixes = [_Prefix(re.compile(p["regex"]), bool(p.get("first"))) for p in data["prefixes"]]
    levels = {str(k): str(v) for k, v in data["levels"].items()}
    msg_levels = [(m["level"], re.compile(m["regex"])) for m in data["message_levels"]]
    return prefixes, levels, msg_levels


def _norm_level(raw: str, levels: dict[str, str]) -> str:
    up = raw.upper()
    return levels.get(raw, levels.get(up, up))


@lru_cache(maxsize=64)
def _zone(name: str) -> timezone | ZoneInfo:
    if not name or name.upper() in ("UTC", "Z", "GMT"):
        return UTC
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)", name)
    if m:
        delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return timezone(delta if m.group(1) == "+" else -delta)
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC  # an unknown zone name is not worth stopping an analysis for


def naive_zone() -> timezone | ZoneInfo:
    """The zone naive timestamps are read in: `L4_LOG_TZ` (an IANA name or `+08:00`), default UTC."""
    return _zone(os.environ.get(TZ_ENV, "").strip())


def _offset(tz: str) -> timezone | None:
    if tz in ("Z", "z", "UTC"):
        return UTC
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)", tz)
    if not m:
        return None
    delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
    return timezone(delta if m.group(1) == "+" else -delta)


def utc_iso(dt: datetime) -> str:
    """`dt` (aware) as the engine's fixed-width UTC ISO string."""
    u = dt.astimezone(UTC)
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
            f".{u.microsecond:06d}Z")


def _iso(g: dict[str, str | None], year: int) -> str | None:
    clock = g.get("time")
    if not clock:
        return None
    try:
        if g.get("date"):
            y, mo, d = (int(x) for x in g["date"].split("-"))  # type: ignore[union-attr]
        elif g.get("usdate"):
            mo, d, y = (int(x) for x in g["usdate"].split("/"))  # type: ignore[union-attr]
        elif g.get("gmon"):
            y, mo, d = year, int(g["gmon"]), int(g["gday"] or 1)  # type: ignore[arg-type]
        elif g.get("mon") in _MONTHS:
            y, mo, d = int(g.get("year") or year), _MONTHS[g["mon"]], int(g.get("day") or 1)  # type: ignore[index]
        else:
            return None  # a time of day alone does not order lines across days
        hh, mm, rest = clock.replace(",", ".").split(":", 2)
        sec, _, frac = rest.partition(".")
        us = int((frac + "000000")[:6]) if frac.isdigit() else 0
        tz = _offset(g["tz"]) if g.get("tz") else None
        dt = datetime(y, mo, d, int(hh), int(mm), min(int(sec), 59), us, tzinfo=tz or naive_zone())
    except (ValueError, TypeError, OverflowError):
        return None
    return utc_iso(dt)


def _prefix_matches(text: str) -> Iterator[tuple[re.Match[str], int]]:
    """The known header prefixes at the start of `text`, one after another (at most MAX_PREFIXES):
    each match with the offset in `text` of the string it was matched against. A prefix marked
    `first` (a bare rank number, a host name) is tried only at the start of the line or right
    after a timestamp, where launchers put it."""
    prefixes = _rules()[0]
    base = 0
    after_ts = True
    for _ in range(MAX_PREFIXES):
        rest = text[base:]
        for p in prefixes:
            if p.first and not after_ts:
                continue
            m = p.rx.match(rest)
            if m is not None:
                break
        else:
            return
        yield m, base
        if m.end() == 0:
            return
        after_ts = m.groupdict().get("time") is not None
        base += m.end()


def _has_ts_groups(g: dict[str, str | None]) -> bool:
    return bool(g.get("time")) and bool(g.get("date") or g.get("usdate") or g.get("gmon")
                                        or g.get("mon") in _MONTHS)


def reads_prefix(line: str) -> bool:
    """Whether a header prefix matches at the start of `line`."""
    return next(_prefix_matches(line), None) is not None


def parse_header(line: str, year: int = 1970, decoration: Decoration | None = None) -> Header:
    """Strip `decoration` (the line's file's, if any), then the known prefixes of `line`; `year`
    completes timestamps that carry none (glog, syslog). A structured line (a JSON object, at the
    start or after the prefixes: `engine.jsonlog`) is read as its record's message, stamp, level and
    rank, the message's own header read in turn."""
    return _parse(strip(line, decoration), year)[0]


def _parse(line: str, year: int, nested: bool = False) -> tuple[Header, bool | None]:
    """The header of `line` (decoration stripped) and whether its stamp is naive (None: no stamp)."""
    if not nested and jsonlog.may_be_record(line):
        rec = jsonlog.read(line)
        if rec is not None:
            return _from_record(rec, None, None, None, None, year)
    ts: str | None = None
    naive: bool | None = None
    level: str | None = None
    rank: int | None = None
    timed = False
    end = 0
    for m, base in _prefix_matches(line):
        g = m.groupdict()
        if g.get("rank") is not None and rank is None:
            rank = int(g["rank"])
        if g.get("level") and level is None:
            level = _norm_level(g["level"], _rules()[1])
        if not timed and _has_ts_groups(g):  # the first timestamp is the line's (as in `_ts_layout`)
            ts, timed = _iso(g, year), True
            naive = None if ts is None else not g.get("tz")
        end = base + m.end()
    message = line[end:].strip()
    if not nested and end and jsonlog.may_be_record(message):  # a collector's prefix, then the record
        rec = jsonlog.read(message)
        if rec is not None:
            return _from_record(rec, ts, naive, level, rank, year)
    return Header(ts=ts, level=_message_level(level, message), rank=rank, message=message), naive


def _message_level(level: str | None, message: str) -> str | None:
    if level is None or level == "INFO":
        for lv, rx in _rules()[2]:
            if rx.search(message):
                return lv
    return level


def _from_record(rec: jsonlog.Record, ts: str | None, naive: bool | None, level: str | None,
                 rank: int | None, year: int) -> tuple[Header, bool | None]:
    """The header of a structured line: what the prefixes before the record gave (`ts`, `level`,
    `rank`; the line's first stamp stays its own), then the record's fields, then the header of its
    message (a Docker `log` field holds the program's whole line). Of the levels, the first that says
    more than INFO wins."""
    inner, inner_naive = _parse(rec.message, year, nested=True)
    if ts is None and rec.time is not None:
        ts, naive = _record_stamp(rec.time)
    if ts is None:
        ts, naive = inner.ts, inner_naive
    levels = [lv for lv in (level, rec.level, inner.level) if lv is not None]
    level = next((lv for lv in levels if lv != "INFO"), levels[0] if levels else None)
    rank = next((r for r in (rank, rec.rank, inner.rank) if r is not None), None)
    return Header(ts=ts, level=level, rank=rank, message=inner.message), naive


_ISO = re.compile(r"(?P<date>\d{4}-\d\d-\d\d)[ Tt](?P<time>\d\d:\d\d:\d\d(?:[.,]\d+)?)\s?"
                  r"(?P<tz>Z|z|[+-]\d\d:?\d\d|UTC)?")


def _record_stamp(time: jsonlog.Time) -> tuple[str | None, bool | None]:
    """A record's time as the engine's UTC stamp, and whether it was naive (an ISO string without offset)."""
    kind, value = time
    if kind == "epoch":
        try:
            return utc_iso(datetime.fromtimestamp(float(value), UTC)), False
        except (ValueError, OverflowError, OSError):
            return None, None
    m = _ISO.fullmatch(str(value).strip())
    if m is None:
        return None, None
    ts = _iso(m.groupdict(), 1970)
    return ts, (None if ts is None else not m.group("tz"))


def may_hold_record(line: str) -> bool:
    """Whether `line` may hold a structured record (a JSON object) anywhere: then its header is read
    line by line, not by its shape (a record's fields are not where a prefix's are)."""
    return "{" in line and _RECORDISH.search(line) is not None


_RECORDISH = re.compile(r'\{\s*"')


_ZERO_DIGITS = str.maketrans("0123456789", "0000000000")
_TS_GROUPS = ("date", "usdate", "time", "gmon", "gday", "mon", "day", "year", "tz")
Layout = tuple[tuple[str, int, int], ...]  # (timestamp group, start, end) in the line


@lru_cache(maxsize=1 << 16)
def _ts_layout(key: str) -> Layout | None:
    """Where `parse_header` finds the timestamp in lines shaped like `key` (digits as "0"), if it does.

    Prefix regexes treat every digit alike, so all lines with one pre-key match the same prefixes at
    the same offsets: the header is parsed once per pre-key, and each line's timestamp is sliced out.
    A zero date of the key is not a real date, so a layout is taken when its groups are there."""
    for m, base in _prefix_matches(key):
        g = m.groupdict()
        if _has_ts_groups(g):
            return tuple((name, base + m.start(name), base + m.end(name))
                         for name in _TS_GROUPS if g.get(name) is not None)
    return None


def timestamp(line: str, year: int = 1970, key: str | None = None,
              decoration: Decoration | None = None) -> str | None:
    """`parse_header(line, year, decoration).ts`, fast for lines whose pre-key (`key`, digits as "0",
    of the undecorated line) was seen."""
    if decoration is not None:
        line, key = decoration.strip(line), None
    if jsonlog.may_be_record(line):  # a structured line: read as `parse_header` does
        return _parse(line, year)[0].ts
    layout = _ts_layout(key if key is not None else line.translate(_ZERO_DIGITS))
    if layout is None:
        return _parse(line, year)[0].ts if may_hold_record(line) else None
    g: dict[str, str | None] = {name: line[a:b] for name, a, b in layout}
    return _iso(g, year)


def _stamp_fields(line: str) -> set[str] | None:
    """The named fields of the timestamp of `line` (date, time, tz, year…); None: it has none. A
    structured line's stamp has a date, and an offset unless it was a naive ISO string."""
    layout = None if jsonlog.may_be_record(line) else _ts_layout(line.translate(_ZERO_DIGITS))
    if layout is None and may_hold_record(line):
        naive = _parse(line, 1970)[1]
        return None if naive is None else {"date", "time"} | (set() if naive else {"tz"})
    return None if layout is None else {name for name, _, _ in layout}


def has_year(line: str) -> bool | None:
    """Whether the timestamp of `line` carries its year (None: the line has no timestamp)."""
    names = _stamp_fields(line)
    return None if names is None else bool(names & {"date", "usdate", "year"})


def naive_stamp(line: str) -> bool | None:
    """Whether the timestamp of `line` is naive (no offset: read in `L4_LOG_TZ`); None: no timestamp.
    `engine.clock.settle_zones` moves a node's naive stamps into the zone its offset-aware ones show."""
    names = _stamp_fields(line)
    return None if names is None else "tz" not in names
