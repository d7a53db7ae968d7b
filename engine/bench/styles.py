"""Log-line formatters for the benchmark's framework styles.

A template line in the data files is ``channel[.args]|text``; the channel says how the
framework would have written it (python logging, glog from c10d, NCCL debug output,
Ascend CANN log, plain stderr ...). :func:`render` turns it into the raw line for one
rank in one style. Times are integer microseconds since the epoch (UTC).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import lru_cache

STYLES = ["megatron", "deepspeed", "mindspore"]

_MON = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_DAY = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
_TAG = re.compile(r"^(raw|out|bare|py|glog|nccl|cann|kern)(?:\.([^|]*))?\|(.*)$", re.S)
_VAR = re.compile(r"\$\{(\w+)(?::([^}]*))?\}")


def _gm(t: int) -> time.struct_time:
    return time.gmtime(t // 1_000_000)


def ts_py(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", _gm(t)) + f",{t // 1000 % 1000:03d}"


def ts_ms(t: int) -> str:
    return time.strftime("%Y-%m-%d-%H:%M:%S", _gm(t)) + f".{t // 1000 % 1000:03d}.{t % 1000:03d}"


def ts_glog(t: int) -> str:
    ns = (t % 1_000_000) * 1000 + (t * 7919) % 1000
    return time.strftime("%m%d %H:%M:%S", _gm(t)) + f".{ns:09d}"


def ts_date(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", _gm(t))


def ts_slurm(t: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", _gm(t))


def ts_agent(t: int) -> str:
    return time.strftime("%Y-%m-%d_%H:%M:%S", _gm(t))


def ts_syslog(t: int) -> str:
    g = _gm(t)
    return f"{_MON[g.tm_mon - 1]} {g.tm_mday:>2} " + time.strftime("%H:%M:%S", g)


def ts_dmesg(t: int) -> str:
    g = _gm(t)
    return f"[{_DAY[g.tm_wday]} {_MON[g.tm_mon - 1]} {g.tm_mday:>2} " + time.strftime("%H:%M:%S %Y]", g)


def ts_us(t: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", _gm(t)) + f".{t % 1_000_000:06d}"


TS_FUNCS = {"ts_py": ts_py, "ts_ms": ts_ms, "ts_glog": ts_glog, "ts_date": ts_date, "ts_us": ts_us,
            "ts_slurm": ts_slurm, "ts_agent": ts_agent, "ts_syslog": ts_syslog, "ts_dmesg": ts_dmesg}


@dataclass
class RankCtx:
    """Per-rank rendering context (host, process ids and line prefixes)."""

    host: str
    rank: int
    local: int
    pid: int
    tid: int
    prefix: str = ""        # stderr lines (tracebacks, warnings)
    out_prefix: str = ""    # stdout lines (logging, progress)
    glog_prefix: str = ""   # c10 glog lines
    vars: dict = field(default_factory=dict)


def make_ctx(style: str, mode: str, host: str, rank: int, local: int, pid: int, tid: int,
             vars: dict) -> RankCtx:
    """Build the context; ``mode`` is the per-job prefix convention of the launcher."""
    rk = f"[rank{rank}]:"
    pre = out = glog = ""
    if style == "megatron":
        if mode == "rank":
            pre, glog = rk, rk
        elif mode == "default":
            pre = out = glog = f"[default{local}]:"
        else:
            glog = rk
    elif style == "deepspeed":
        host_pre = f"{host}: " if mode == "pdsh" else ""
        pre = out = host_pre
        glog = host_pre + rk
    return RankCtx(host, rank, local, pid, tid, pre, out, glog, vars)


@lru_cache(maxsize=4096)
def parse(spec: str) -> tuple[str, str, str]:
    """Split a template line into (channel, args, text); untagged lines are ``raw``."""
    m = _TAG.match(spec)
    if not m:
        return "raw", "", spec
    return m.group(1), m.group(2) or "", m.group(3)


def subst(text: str, lookup) -> str:
    """Replace ``${name}`` / ``${name:fmt}`` using ``lookup(name)``."""
    if "${" not in text:
        return text

    def rep(m: re.Match) -> str:
        v = lookup(m.group(1))
        return format(v, m.group(2)) if m.group(2) else str(v)

    return _VAR.sub(rep, text)


_PY_SRC = {"deepspeed": "logging.py:96:log_dist", "mindspore": "mindspore/train/callback/_callback.py:142"}


def render(style: str, channel: str, args: str, text: str, t: int, ctx: RankCtx) -> str:
    """Format an already-substituted message as ``style`` writes it on ``channel``."""
    if channel == "raw":
        return ctx.prefix + text
    if channel == "out":
        return ctx.out_prefix + text
    if channel == "bare":
        return text
    if channel == "py":
        level, _, src = args.partition(".")
        level = level or "INFO"
        if style == "megatron":
            return f"{ctx.out_prefix}{ts_py(t)} - {level} - {text}"
        if style == "deepspeed":
            return f"{ctx.out_prefix}[{ts_py(t)}] [{level}] [{src or _PY_SRC[style]}] {text}"
        return f"[{level}] ME({ctx.pid}:{ctx.tid},MainProcess):{ts_ms(t)} [{src or _PY_SRC[style]}] {text}"
    if channel == "glog":
        level, _, src = args.partition(".")
        return f"{ctx.glog_prefix}[{level}{ts_glog(t)} {src}] {text}"
    if channel == "nccl":
        return f"{ctx.prefix}{ctx.host}:{ctx.pid}:{ctx.tid} [{ctx.local}] NCCL {args or 'INFO'} {text}"
    if channel == "cann":
        level, mod, src = (args.split(".", 2) + ["", ""])[:3]
        return f"[{level}] {mod}({ctx.pid},python):{ts_ms(t)} [{src}]{text}"
    if channel == "kern":
        return f"{ts_dmesg(t)} {text}"
    raise ValueError(f"unknown channel {channel!r}")


def render_kernel_log(text: str, t: int, host: str) -> str:
    """A line as written to ``<node>/kernel.log`` (syslog format)."""
    return f"{ts_syslog(t)} {host} kernel: {text}"
