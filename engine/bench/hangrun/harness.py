"""Real hung jobs: torchrun/gloo runs on this machine where one rank hangs, with their dumps.

Four torchrun agents (`--nnodes 4 --node-rank i`, static rendezvous on 127.0.0.1) stand in for four
nodes of two ranks each. `program.py` makes one rank hang (or die, or call another collective); every
rank that can writes its flight-recorder dump and a faulthandler stack dump when its loop stalls.
The harness waits for the healthy ranks' collective timeouts, takes `py-spy dump` stacks of the ranks
still alive (when py-spy is installed), stops everything, and writes `truth.json` from what it
injected. Needs torch (`pip install 'l4[realrun]'`); the committed fixtures need nothing.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PROGRAM = Path(__file__).with_name("program.py")
NODES = 4
PER_NODE = 2
# what each scenario's culprit does, its collective and how far the culprit got
SCENARIOS: dict[str, dict] = {
    "sleep_before_collective": {"collective": "all_reduce", "missing": True},
    "dataloader_hang": {"collective": "all_reduce", "missing": True},
    "wrong_collective": {"collective": "all_reduce", "missing": False},
    "wrong_shape": {"collective": "all_reduce", "missing": False},
    "rank_killed": {"collective": "all_reduce", "missing": True},
    "rank_stopped": {"collective": "all_reduce", "missing": True},
    "subgroup_hang": {"collective": "all_reduce", "missing": True},
}
# (scenario, culprit rank, dump layout): the culprit sits on different nodes; two dump layouts
CASES: list[tuple[str, int, str]] = [
    ("sleep_before_collective", 5, "flight_recorder"), ("sleep_before_collective", 2, "node"),
    ("dataloader_hang", 6, "node"), ("dataloader_hang", 1, "flight_recorder"),
    ("wrong_collective", 3, "flight_recorder"), ("wrong_collective", 6, "node"),
    ("wrong_shape", 4, "node"), ("wrong_shape", 1, "flight_recorder"),
    ("rank_killed", 7, "flight_recorder"), ("rank_killed", 2, "node"),
    ("rank_stopped", 3, "node"), ("rank_stopped", 6, "flight_recorder"),
    ("subgroup_hang", 1, "flight_recorder"), ("subgroup_hang", 2, "node"),
]


@dataclass
class RunResult:
    case: Path
    seconds: float
    dumps: int
    stacks: int


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _split(name: str) -> str:
    return "test" if int(hashlib.sha1(name.encode()).hexdigest(), 16) % 2 else "dev"


def _torchrun() -> list[str]:
    exe = Path(sys.executable).with_name("torchrun")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "torch.distributed.run"]


def run_job(job: Path, scenario: str, culprit: int, layout: str, *, timeout: float = 10.0,
            pyspy: bool = True) -> tuple[float, int, int]:
    """One torchrun job into `job` (the failed job's folder): (seconds, dumps written, py-spy stacks)."""
    job.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="l4-hangrun-"))
    stop, pids = work / "stop", work / "pids"
    pids.mkdir()
    dump = (str(job / "flight_recorder" / "nccl_trace_rank_{rank}") if layout == "flight_recorder"
            else str(job / "{node}" / "nccl_trace_rank_{rank}"))
    port = _free_port()
    env = {**os.environ, "L4_HANG_SCENARIO": scenario, "L4_HANG_RANK": str(culprit),
           "L4_HANG_TIMEOUT": str(timeout), "L4_HANG_DUMP_AFTER": str(timeout * 0.4),
           "L4_HANG_LOG": str(job / "{node}" / "rank-{rank}.log"), "L4_HANG_STOP": str(stop),
           "L4_HANG_PIDS": str(pids), "L4_HANG_DUMP": dump if scenario != "none" else "",
           "TORCH_FR_BUFFER_SIZE": "2000", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    agents = []
    for node in range(NODES):
        (job / f"node-{node}").mkdir(exist_ok=True)
        out = open(job / f"node-{node}" / "launcher.log", "wb")
        cmd = [*_torchrun(), f"--nnodes={NODES}", f"--nproc-per-node={PER_NODE}", f"--node-rank={node}",
               "--master-addr=127.0.0.1", f"--master-port={port}", "--max-restarts=0",
               "--monitor-interval=0.5", str(PROGRAM)]
        agents.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                        start_new_session=True), out))
    deadline = started + 60 + 4 * timeout
    healthy_done = stalled = False
    stacks = 0
    while time.monotonic() < deadline and any(p.poll() is None for p, _ in agents):
        time.sleep(0.5)
        if scenario != "none" and not stalled and _all_logged(job, culprit, b"dumping flight recorder"):
            stalled = True  # every rank that can is stuck: its stacks now are the hang's
            if pyspy:
                stacks = _pyspy_stacks(job, pids)
        if scenario != "none" and not healthy_done and _all_logged(job, culprit, b"collective failed"):
            healthy_done = True
            stop.touch()
            deadline = min(deadline, time.monotonic() + 8)
    for p, out in agents:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        out.close()
    for pidfile in pids.glob("*.pid"):  # a stopped or orphaned rank
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    shutil.rmtree(work, ignore_errors=True)
    dumps = len(list(job.rglob("nccl_trace_rank_*")))
    return time.monotonic() - started, dumps, stacks


def _all_logged(job: Path, culprit: int, what: bytes) -> bool:
    """Every healthy rank has logged `what` (or finished)."""
    for rank in range(NODES * PER_NODE):
        if rank == culprit:
            continue
        log = job / f"node-{rank // PER_NODE}" / f"rank-{rank}.log"
        try:
            text = log.read_bytes()
        except OSError:
            return False
        if what not in text and b"training finished" not in text:
            return False
    return True


def _pyspy_stacks(job: Path, pids: Path) -> int:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        return 0
    (job / "stacks").mkdir(exist_ok=True)
    procs = [(f.stem.split("-")[1], subprocess.Popen([exe, "dump", "--pid", f.read_text().strip()],
                                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
             for f in sorted(pids.glob("rank-*.pid"))]
    n = 0
    for rank, proc in procs:  # all at once: the window before the timeouts fire is short
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            continue
        if proc.returncode == 0 and out:
            (job / "stacks" / f"rank-{rank}.pyspy").write_bytes(out)
            n += 1
    return n


def generate(out: Path, cases: list[tuple[str, int, str]] | None = None, *, timeout: float = 10.0,
             log=print) -> list[RunResult]:
    """The hang corpus under `out`: one folder per case with `failed/`, `history-0/` and `truth.json`."""
    out.mkdir(parents=True, exist_ok=True)
    history = out / "_history"
    if not history.exists():
        run_job(history, "none", -1, "flight_recorder", timeout=timeout, pyspy=False)
    results = []
    for scenario, culprit, layout in cases or CASES:
        name = f"hang-{scenario.replace('_', '-')}-r{culprit}"
        case = out / name
        shutil.rmtree(case, ignore_errors=True)
        secs, dumps, stacks = run_job(case / "failed", scenario, culprit, layout, timeout=timeout)
        shutil.copytree(history, case / "history-0")
        node = f"node-{culprit // PER_NODE}"
        truth = {
            "kind": f"hang/{scenario}", "category": "hardware/node", "stage": "training",
            "iteration": None, "faulty_nodes": [node], "stuck_ranks": [culprit],
            "collective": SCENARIOS[scenario]["collective"], "dump_layout": layout,
            "source": "hangrun/gloo", "split": _split(name),
            "indicating": [], "cascade_lines": [], "context_lines": [],
        }
        (case / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
        log(f"{name}: {secs:.0f} s, {dumps} dumps, {stacks} py-spy stacks")
        results.append(RunResult(case, secs, dumps, stacks))
    shutil.rmtree(history, ignore_errors=True)
    return results


def compress(root: Path) -> None:
    """gzip every rank log of a generated corpus in place (the committed fixtures are small)."""
    import gzip

    for log in root.rglob("*.log"):
        with open(log, "rb") as src, gzip.GzipFile(str(log) + ".gz", "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)
        log.unlink()
