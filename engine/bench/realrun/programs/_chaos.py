"""What the harness injects into a real-run program, and the node's log clock (runs inside torchrun workers).

The harness picks the fault through the environment of each node's launcher: ``L4RR_FAULT`` (kind; set
only on the nodes it hits), ``L4RR_FAULT_SCOPE`` (``all``, ``rank0`` or ``local``: the local ranks in
``L4RR_FAULT_LOCAL``), ``L4RR_FAULT_STEP`` and ``L4RR_FAULT_VARIANT``. Global ranks come from the c10d
rendezvous, so every worker records its rank in ``$L4RR_WORK/ranks/`` for the labeller.
Programs call `point` at their injection points and `active` where the fault changes what they do
(a bad token id, an infinite learning rate); the failure itself is then whatever torch really raises.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import resource
import signal
import sys
import time

FAULT = os.environ.get("L4RR_FAULT", "")
SCOPE = os.environ.get("L4RR_FAULT_SCOPE", "all")
_LOCALS = {int(r) for r in os.environ.get("L4RR_FAULT_LOCAL", "").split(",") if r.strip()}
STEP = int(os.environ.get("L4RR_FAULT_STEP", "-1"))
VARIANT = int(os.environ.get("L4RR_FAULT_VARIANT", "0"))
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", "0"))
STEPS = int(os.environ.get("L4RR_STEPS", "30"))
SAVE_EVERY = int(os.environ.get("L4RR_SAVE_EVERY", "10"))
TIMEOUT_S = float(os.environ.get("L4RR_TIMEOUT", "8"))
WORK = os.environ.get("L4RR_WORK", ".")
DATA = os.environ.get("L4RR_DATA", os.path.join(WORK, "data"))
HIDDEN = int(os.environ.get("L4RR_HIDDEN", "32"))
SEED = int(os.environ.get("L4RR_SEED", "0"))
TS_FORMAT = os.environ.get("L4RR_TSFMT", "naive")
NODE = os.environ.get("L4RR_HOSTNAME", "localhost")
VOCAB = int(os.environ.get("L4RR_VOCAB", "96"))
SEQ = int(os.environ.get("L4RR_SEQ", "17"))


def _selected() -> bool:
    if not FAULT:
        return False
    if SCOPE == "rank0":
        return RANK == 0
    return SCOPE == "all" or LOCAL_RANK in _LOCALS


def active(kind: str, step: int | None = None) -> bool:
    """Whether fault `kind` fires on this rank (at `step`, when given)."""
    return FAULT == kind and _selected() and (step is None or step == STEP)


def _record_rank() -> None:
    folder = os.path.join(WORK, "ranks")
    os.makedirs(folder, exist_ok=True)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))  # > 0: a worker torchrun restarted
    name = f"{NODE}-{LOCAL_RANK}.json" if attempt == 0 else f"{NODE}-{LOCAL_RANK}.attempt{attempt}.json"
    with open(os.path.join(folder, name), "w") as f:
        json.dump({"node": NODE, "local_rank": LOCAL_RANK, "rank": RANK, "pid": os.getpid()}, f)


def stamp(now: float | None = None) -> str:
    """The current time as this node's logs write it (ISO with offset, ISO UTC, naive local, or nothing)."""
    now = time.time() if now is None else now
    if TS_FORMAT == "none":
        return ""
    if TS_FORMAT == "iso_offset":
        return datetime.datetime.fromtimestamp(now).astimezone().isoformat(timespec="milliseconds")
    if TS_FORMAT == "iso_z":
        dt = datetime.datetime.fromtimestamp(now, datetime.UTC)
        return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    dt = datetime.datetime.fromtimestamp(now)
    return dt.strftime("%Y-%m-%d %H:%M:%S,") + f"{dt.microsecond // 1000:03d}"


class NodeClock(logging.Formatter):
    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return stamp(record.created)


def logger(name: str, fmt: str) -> logging.Logger:
    if TS_FORMAT == "none":  # a node whose programs log no time at all
        fmt = fmt.replace("%(asctime)s ", "")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NodeClock(fmt))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    return logging.getLogger(name)


def point(where: str, step: int | None = None) -> None:
    """An injection point: ``step`` (each training step), ``fetch`` (a data-loader fetch), ``save``
    (just before a checkpoint is written)."""
    if where == "step" and step == STEP and _selected():
        if FAULT == "rank_sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif FAULT == "rank_sigstop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif FAULT == "sigterm_preempt" and LOCAL_RANK == 0:
            os.kill(os.getppid(), signal.SIGTERM)  # the node's agent is told to stop, as a scheduler does
            time.sleep(60)
    elif where == "fetch" and step == STEP and _selected():
        if FAULT == "straggler":
            time.sleep(TIMEOUT_S * 2.5)
    elif where == "save" and _selected() and step == STEP:
        if FAULT == "disk_full_ckpt":
            # Python ignores SIGXFSZ, so the write that crosses the limit fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (int(os.environ.get("L4RR_FSIZE", 96 << 10)), -1))
        elif FAULT == "ckpt_permission":
            ckpt = os.path.join(WORK, "ckpt")
            os.makedirs(ckpt, exist_ok=True)
            os.chmod(ckpt, 0o555)
            if os.geteuid() == 0:
                os.seteuid(65534)  # root ignores modes; the job runs as an ordinary user


def limit_memory() -> None:
    """Cap this process's address space a little above what it uses now (a full host)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    cap = pages * resource.getpagesize() + (384 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))


if "RANK" in os.environ:
    _record_rank()
