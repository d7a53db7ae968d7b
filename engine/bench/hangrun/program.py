"""A small gloo training loop that one rank makes hang (run by torchrun from `engine.bench.hangrun`).

Each rank sends its stdout and stderr to its own rank file (as a cluster's log collector would), logs
progress with Python logging, and keeps a watchdog thread: when the loop makes no progress for
`L4_HANG_DUMP_AFTER` seconds, it writes the rank's flight-recorder dump (what PyTorch's watchdog
heartbeat does on NCCL) and a faulthandler dump of all its threads into its log. The scenario
(`L4_HANG_SCENARIO`) decides what the culprit rank (`L4_HANG_RANK`) does at step `L4_HANG_STEP`.
"""
from __future__ import annotations

import datetime
import faulthandler
import logging
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
SCENARIO = os.environ.get("L4_HANG_SCENARIO", "none")
CULPRIT = int(os.environ.get("L4_HANG_RANK", "-1"))
STEP = int(os.environ.get("L4_HANG_STEP", "6"))
STEPS = int(os.environ.get("L4_HANG_STEPS", "12"))
TIMEOUT = float(os.environ.get("L4_HANG_TIMEOUT", "6"))
DUMP_AFTER = float(os.environ.get("L4_HANG_DUMP_AFTER", "4"))
PER_NODE = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
NODE = f"node-{RANK // PER_NODE}"
# path templates with {rank} and {node}, chosen by the harness
LOG_FILE = os.environ["L4_HANG_LOG"].format(rank=RANK, node=NODE)
DUMP_FILE = os.environ.get("L4_HANG_DUMP", "").format(rank=RANK, node=NODE)
STOP_FILE = os.environ.get("L4_HANG_STOP", "")  # the harness creates it: every rank exits
PID_DIR = os.environ.get("L4_HANG_PIDS", "")  # the harness reads rank PIDs here (for py-spy)

_progress = time.monotonic()
_dumped = threading.Event()


def _redirect_output() -> None:
    os.makedirs(os.path.dirname(LOG_FILE), exist_ok=True)
    fd = os.open(LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def _dump() -> None:
    if _dumped.is_set():
        return
    _dumped.set()
    log.warning("no progress for %.0f s: dumping flight recorder and stacks", DUMP_AFTER)
    if DUMP_FILE:
        os.makedirs(os.path.dirname(DUMP_FILE), exist_ok=True)
        data = torch._C._distributed_c10d._dump_fr_trace()
        with open(DUMP_FILE + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(DUMP_FILE + ".tmp", DUMP_FILE)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()


def _watchdog() -> None:
    while True:
        time.sleep(0.25)
        if STOP_FILE and os.path.exists(STOP_FILE):
            _dump()
            os._exit(3)
        if time.monotonic() - _progress > DUMP_AFTER:
            _dump()


class ToyData(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10_000

    def __getitem__(self, i: int) -> torch.Tensor:
        if SCENARIO == "dataloader_hang" and RANK == CULPRIT and i == STEP:
            time.sleep(3600)
        return torch.full((8,), float(i % 7))


def _collective(step: int, t: torch.Tensor, subgroup: dist.ProcessGroup | None) -> None:
    culprit = RANK == CULPRIT and step == STEP
    if SCENARIO == "sleep_before_collective" and culprit:
        time.sleep(3600)
    if SCENARIO == "rank_killed" and culprit:
        os.kill(os.getpid(), signal.SIGKILL)
    if SCENARIO == "rank_stopped" and culprit:
        os.kill(os.getpid(), signal.SIGSTOP)
    if SCENARIO == "wrong_collective" and culprit:
        dist.broadcast(t, src=0)
        return
    if SCENARIO == "wrong_shape" and culprit:
        dist.all_reduce(torch.cat([t, t]))
        return
    if SCENARIO == "subgroup_hang" and subgroup is not None:
        if culprit:
            time.sleep(3600)
        if RANK < WORLD // 2:
            dist.all_reduce(t, group=subgroup)
    dist.all_reduce(t)


def main() -> None:
    global _progress
    _redirect_output()
    if PID_DIR:
        with open(os.path.join(PID_DIR, f"rank-{RANK}.pid"), "w") as fh:
            fh.write(str(os.getpid()))
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout,
        format=f"%(asctime)s %(levelname)s [rank{RANK}] %(name)s: %(message)s")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=TIMEOUT))
    log.info("initialized process group: world size %d, backend gloo", WORLD)
    subgroup = None
    if SCENARIO == "subgroup_hang":
        subgroup = dist.new_group(list(range(WORLD // 2)))
        log.info("created data-parallel subgroup of ranks %s", list(range(WORLD // 2)))
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = iter(torch.utils.data.DataLoader(ToyData(), batch_size=1, num_workers=0))
    dist.barrier()
    _progress = time.monotonic()  # the watchdog judges the training loop only
    threading.Thread(target=_watchdog, daemon=True).start()
    for step in range(1, STEPS + 1):
        x = next(loader)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        grad = model.weight.grad.detach().clone().reshape(-1)
        try:
            _collective(step, grad, subgroup)
        except Exception as exc:  # the timeout or peer loss every healthy rank sees
            log.error("step %d: collective failed: %s", step, exc)
            _dump()
            raise
        opt.step()
        _progress = time.monotonic()
        log.info("step %d/%d loss %.4f", step, STEPS, loss.item())
    dist.barrier()
    log.info("training finished")
    dist.destroy_process_group()


log = logging.getLogger("train")

if __name__ == "__main__":
    main()
