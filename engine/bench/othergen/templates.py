"""Line templates of the outsider generator: YAML data, {placeholder} rendering and time stamps.

A template is plain text with `{name}` or `{name:spec}` fields (`{{`/`}}` are literal braces). A field's value
comes from the context: a callable gets the spec as its argument (``{hex:12}``, ``{int:10-99}``), anything
else is formatted with the spec (``{it:8d}``). Time stamps are callables of the context too (see `stamps`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path

import yaml

DATA = Path(__file__).with_name("data")
_FIELD = re.compile(r"\{\{|\}\}|\{([a-z_0-9]+)(?::([^{}]*))?\}")


@cache
def load(name: str) -> dict:
    """One of the generator's YAML data files (families, faults)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((DATA / f"{name}.yaml").read_text(), Loader=loader)


def render(template: str, ctx: dict) -> str:
    """`template` with its fields filled from `ctx`; an unknown field is an error (a typo in the data)."""

    def field(m: re.Match) -> str:
        whole = m.group(0)
        if whole == "{{":
            return "{"
        if whole == "}}":
            return "}"
        name, spec = m.group(1), m.group(2)
        if name not in ctx:
            raise KeyError(f"template field {{{name}}} has no value in: {template!r}")
        value = ctx[name]
        if callable(value):
            return str(value(spec))
        return format(value, spec) if spec else str(value)

    return _FIELD.sub(field, template)


def randoms(rng: random.Random) -> dict[str, Callable[[str | None], str]]:
    """The random fields: {hex:N}, {int:A-B}, {intc:A-B} (1,234), {flt:A-B:P}, {pick:a|b|c}."""

    def hex_(spec: str | None) -> str:
        return "".join(rng.choice("0123456789abcdef") for _ in range(int(spec or 8)))

    def int_(spec: str | None) -> str:
        lo, hi = (int(x) for x in (spec or "0-9").split("-"))
        return str(rng.randint(lo, hi))

    def intc(spec: str | None) -> str:  # with thousands separators, as Hugging Face prints counts
        return f"{int(int_(spec)):,}"

    def flt(spec: str | None) -> str:
        span, _, prec = (spec or "0-1:3").partition(":")
        lo, hi = (float(x) for x in span.split("-"))
        return f"{rng.uniform(lo, hi):.{int(prec or 3)}f}"

    def pick(spec: str | None) -> str:
        return rng.choice((spec or "").split("|"))

    return {"hex": hex_, "int": int_, "intc": intc, "flt": flt, "pick": pick}


def stamps(local: datetime, utc_offset_h: int, uptime: float, rng: random.Random) -> dict[str, Callable]:
    """The time-stamp fields of one line written at `local` (the node's wall clock, naive, in a zone
    `utc_offset_h` hours from UTC) on a machine up for `uptime` seconds; each is formatted when used."""
    us = local.microsecond
    offset = f"{'+' if utc_offset_h >= 0 else '-'}{abs(utc_offset_h):02d}:00"
    ms3 = f"{us // 1000:03d}"

    def ns() -> str:  # c10d logs nanoseconds: the microsecond clock and three drawn digits
        return f"{us * 1000 + rng.randint(0, 999):09d}"

    return {
        "py": lambda _s=None: local.strftime("%Y-%m-%d %H:%M:%S,") + ms3,
        "c10d": lambda _s=None: f"{local.month}{local.day:02d} {local:%H:%M:%S}.{ns()}",
        "glog": lambda _s=None: f"{local.month:02d}{local.day:02d} {local:%H:%M:%S}.{us:06d}",
        "plog": lambda _s=None: local.strftime("%Y-%m-%d-%H:%M:%S.") + f"{ms3}.{us % 1000:03d}",
        "plog_s": lambda _s=None: local.strftime("%Y-%m-%d-%H:%M:%S"),
        "elastic": lambda _s=None: local.strftime("%Y-%m-%d_%H:%M:%S"),
        "iso": lambda _s=None: local.strftime("%Y-%m-%dT%H:%M:%S"),
        "syslog": lambda _s=None: f"{local:%b} {local.day:2d} {local:%H:%M:%S}",
        "dmesg": lambda _s=None: f"[{uptime:12.6f}]",
        "dmesg_iso": lambda _s=None: local.strftime("%Y-%m-%dT%H:%M:%S,") + f"{us:06d}{offset}",
        "ctime": lambda _s=None: f"[{local:%a %b} {local.day:2d} {local:%H:%M:%S %Y}]",
        "dt": lambda _s=None: local.strftime("%Y-%m-%d %H:%M:%S"),
        "bracket": lambda _s=None: local.strftime("[%Y-%m-%d %H:%M:%S]"),
    }


def clock(start_utc: datetime, utc_offset_h: int, skew_s: float, t: float) -> datetime:
    """The naive local wall-clock time of moment `t` (seconds into the job) on a node whose clock is
    `skew_s` seconds off."""
    return start_utc + timedelta(hours=utc_offset_h, seconds=t + skew_s)
