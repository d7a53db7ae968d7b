"""How production clusters collect a job's logs, per shape: which file a line lands in and what the
collector, the launcher or the component puts in front of it (prefixes, timestamp formats).

k8s    a folder per pod (`<job>-worker-3/`), one `pytorch.log` per container with torchrun's
       `[defaultN]:` prefixes, the script's structured logger as JSON with epoch seconds, and the node's
       kernel journal beside it (`node-journal.log`, ISO with offset).
slurm  a folder per host with `slurm-<jobid>.out` (`srun -l` task prefixes `N: `, slurmstepd lines) and
       the host's `messages` (syslog stamps without a year).
bare   a folder per host with one file per rank, each line stamped by the wrapper in ISO with the
       site's offset, the launcher's `launcher.log`, `dmesg.log` (seconds since boot) and, on Ascend,
       `plog/plog-<pid>_<date>.log`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

SHAPES = ("k8s", "slurm", "bare")
TIME_FIELDS = frozenset({"pyts", "glog", "nemots", "date", "plogts", "plogday", "slurmts"})
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


@dataclass(frozen=True)
class Clock:
    """A node's view of time: the job's start (epoch seconds), the site's UTC offset and its skew."""

    start: float
    offset_min: int
    skew_s: float = 0.0

    def at(self, t: float) -> datetime:
        return datetime.fromtimestamp(
            self.start + t + self.skew_s, timezone(timedelta(minutes=self.offset_min))
        )

    def field(self, name: str, t: float) -> str:
        """One timestamp field a line template may use ({pyts}, {glog}, {plogts}, ...)."""
        d = self.at(t)
        us = d.microsecond
        day = f"{d.year:04d}-{d.month:02d}-{d.day:02d}"
        hms = f"{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
        if name == "pyts":
            return f"{day} {hms},{us // 1000:03d}"
        if name == "glog":
            return f"{d.month:02d}{d.day:02d} {hms}.{us:06d}"
        if name in ("nemots", "date"):
            return f"{day} {hms}"
        if name == "plogts":
            return f"{day}-{hms}.{us // 1000:03d}.{us % 1000:03d}"
        if name == "plogday":
            return f"{day}-{hms}"
        if name == "slurmts":
            return f"{day}T{hms}"
        raise KeyError(name)

    def iso(self, t: float, digits: int = 3) -> str:
        d = self.at(t)
        off = self.offset_min
        sign = "+" if off >= 0 else "-"
        stamp = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
        frac = f"{d.microsecond:06d}"[:digits]
        return f"{stamp}.{frac}{sign}{abs(off) // 60:02d}:{abs(off) % 60:02d}"

    def syslog(self, t: float) -> str:
        d = self.at(t)
        return f"{MONTHS[d.month - 1]} {d.day:2d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"

    def epoch(self, t: float) -> float:
        return round(self.start + t + self.skew_s, 3)


def rank_file(shape: str, node: str, jobid: str, rank: int) -> str:
    if shape == "k8s":
        return f"{node}/pytorch.log"
    if shape == "slurm":
        return f"{node}/slurm-{jobid}.out"
    return f"{node}/train_rank{rank:03d}.log"


def launcher_file(shape: str, node: str, jobid: str) -> str:
    if shape == "bare":
        return f"{node}/launcher.log"
    return rank_file(shape, node, jobid, 0)


def syslog_file(shape: str, node: str) -> str:
    return {"k8s": f"{node}/node-journal.log", "slurm": f"{node}/messages"}.get(shape, f"{node}/dmesg.log")


def plog_file(node: str, pid: int, clock: Clock) -> str:
    return f"{node}/plog/plog-{pid}_{clock.at(0).strftime('%Y%m%d%H%M%S')}{pid % 1000:03d}.log"


def render(
    shape: str,
    source: str,
    text: str,
    clock: Clock,
    t: float,
    *,
    lr: int = 0,
    task: int = 0,
    host: str = "",
    uptime: float = 0.0,
) -> str:
    """The physical line as it stands in the collected file.

    source: rank (a rank's stdout/stderr), launcher (torchrun agent, slurmstepd), syslog (kernel), plog,
    app (the script's structured logger; `text` is then its message and the fields after a tab)."""
    if source == "syslog":
        if shape == "k8s":
            return f"{clock.iso(t, 6)} {host} kernel: {text}"
        if shape == "slurm":
            return f"{clock.syslog(t)} {host} kernel: {text}"
        return f"[{uptime + t:12.6f}] {text}"
    if source == "plog":
        return text
    if source == "app":
        msg, _, extra = text.partition("\t")
        kv = {k: _number(v) for k, v in (p.split("=", 1) for p in extra.split() if "=" in p)}
        if shape == "k8s":
            body = json.dumps({"ts": clock.epoch(t), "level": "info", "logger": "train", "msg": msg, **kv})
        elif shape == "slurm":
            d = clock.at(t)
            body = d.strftime("%Y-%m-%d %H:%M:%S,") + f"{d.microsecond // 1000:03d} INFO train: {msg} {extra}"
        else:
            body = f"{msg} {extra}".rstrip()
            return f"{clock.iso(t)} | INFO | train | {body}"
        return _rank_prefix(shape, body, clock, t, lr, task)
    if source == "launcher":
        return f"{clock.iso(t)} {text}" if shape == "bare" else text
    return _rank_prefix(shape, text, clock, t, lr, task)


def _rank_prefix(shape: str, text: str, clock: Clock, t: float, lr: int, task: int) -> str:
    if shape == "k8s":
        return f"[default{lr}]:{text}"
    if shape == "slurm":
        return f"{task}: {text}"
    return f"{clock.iso(t)} {text}"


def _number(v: str) -> int | float | str:
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v
