"""Timestamp styles of the components the generator imitates (all UTC; a node's clock may be off)."""

from __future__ import annotations

import time

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def _parts(t: float) -> tuple[time.struct_time, int]:
    return time.gmtime(int(t)), int(round((t - int(t)) * 1e6)) % 1000000


def py(t: float) -> str:
    """Python logging: 2026-05-01 10:22:31,123"""
    g, us = _parts(t)
    return time.strftime("%Y-%m-%d %H:%M:%S", g) + f",{us // 1000:03d}"


def raylet(t: float) -> str:
    """Ray's C++ log prefix up to the level: [2026-05-01 10:22:31,123"""
    return "[" + py(t)


def syslog(t: float) -> str:
    """Syslog without a year: May  1 10:22:31"""
    g, _ = _parts(t)
    return f"{MONTHS[g.tm_mon - 1]} {g.tm_mday:2d} " + time.strftime("%H:%M:%S", g)


def glog(t: float) -> str:
    """c10d's glog stamp after the level letter: 0501 10:22:31.393067540"""
    g, us = _parts(t)
    return time.strftime("%m%d %H:%M:%S", g) + f".{us:06d}{(us * 7) % 1000:03d}"


def cann(t: float) -> str:
    """CANN / MindSpore / plog: 2026-05-01-10:22:31.123.456"""
    g, us = _parts(t)
    return time.strftime("%Y-%m-%d-%H:%M:%S", g) + f".{us // 1000:03d}.{us % 1000:03d}"


def iso(t: float) -> str:
    g, us = _parts(t)
    return time.strftime("%Y-%m-%dT%H:%M:%S", g) + f".{us:06d}Z"


def ctime(t: float) -> str:
    """mpirun --timestamp-output: Fri May  1 10:22:31 2026"""
    g, _ = _parts(t)
    return f"{DAYS[g.tm_wday]} {MONTHS[g.tm_mon - 1]} {g.tm_mday:2d} " + time.strftime("%H:%M:%S %Y", g)


STYLES = {
    "ts": py,
    "rts": raylet,
    "sts": syslog,
    "ets": glog,
    "cts": cann,
    "mts": cann,
    "pts": cann,
    "ats": iso,
}


def stamps(t: float, boot: float, template: str = "") -> dict[str, str]:
    """The ${…} stamp placeholders of the wording files that `template` uses (all of them when it is
    empty) for one moment on one node's clock; `up` is the kernel's seconds since boot."""
    out = {k: f(t) for k, f in STYLES.items() if not template or "${" + k + "}" in template}
    if not template or "${up}" in template:
        out["up"] = f"{t - boot:.6f}"
    return out
