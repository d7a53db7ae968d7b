"""A tensor-parallel loop with DTensor (real-run corpus, style ``tp``): a 2-D ``DeviceMesh`` (``dp`` x ``tp``,
the two ranks of a node one tensor-parallel group) on the CPU with gloo, the MLP's first linear layer
``ColwiseParallel`` and the output head ``RowwiseParallel`` by ``parallelize_module`` (their weights sharded
``DTensor``s), the gradients averaged over the data-parallel groups by hand, real
``torch.distributed.checkpoint`` saves (``ckpt/step-N``, one ``.distcp`` per rank) and loads of the newest
complete one. Its own lines come from a loguru-like logger on stderr (``2026-12-02 06:01:02.345 | INFO     |
__main__:train:120 - ...``, the node's local time, naive, or ISO with its offset where the node writes one);
torch's own warnings come as they come."""

from __future__ import annotations

import datetime
import glob
import importlib.util
import json
import logging
import math
import os
import resource
import sys
import time

import _chaos as C
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.distributed_c10d import _set_pg_timeout
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.utils.data import DataLoader

BATCH = 8
# the config's tp_size: the ranks of one node (3 in a config written for nodes of three GPUs)
TP = 3 if C.active("bad_world_size") else int(os.environ.get("LOCAL_WORLD_SIZE", "2"))
CKPT = os.path.join(C.WORK, "ckpt")
LR = 3e-3


class Loguru(logging.Formatter):
    """loguru's default format ``{time:YYYY-MM-DD HH:mm:ss.SSS} | {level: <8} | {name}:{function}:{line} -
    {message}`` (local naive time; a node that logs ISO times: ``{time:YYYY-MM-DDTHH:mm:ss.SSSZZ}``)."""

    def format(self, record: logging.LogRecord) -> str:
        if C.TS_FORMAT in ("naive", "none"):
            dt = datetime.datetime.fromtimestamp(record.created)
            when = dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{dt.microsecond // 1000:03d}"
        else:
            when = C.stamp(record.created)
        text = (f"{when} | {record.levelname:<8} | __main__:{record.funcName}:{record.lineno} - "
                f"{record.getMessage()}")
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


def _logger() -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(Loguru())
    out = logging.getLogger("tp_train")
    out.handlers[:] = [handler]
    out.propagate = False
    out.setLevel(logging.DEBUG)
    return out


log = _logger()


def latest() -> str | None:
    """The newest complete DCP checkpoint (one with its ``.metadata``)."""
    done = [d for d in glob.glob(os.path.join(CKPT, "step-*"))
            if os.path.isfile(os.path.join(d, ".metadata"))]
    return max(done, key=lambda d: int(d.rsplit("-", 1)[1])) if done else None


def lr_at(step: int) -> float:
    if C.active("nan_loss", step):
        return float("inf")  # warmup_steps: 0 in this config, and the schedule divides by it
    return LR * min(1.0, step / 4) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / C.STEPS)))


def state(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> dict:
    model_sd, optim_sd = get_state_dict(model, opt)
    return {"model": model_sd, "optim": optim_sd, "train": {"step": step}}


def save(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    path = os.path.join(CKPT, f"step-{step}")
    if C.RANK == 0:
        log.info(f"Saving checkpoint to {path}")
    t0 = time.monotonic()
    C.point("save", step)
    if C.active("disk_full_ckpt", step):  # rank 0's shard (~40 KB) crosses it; its stderr.log (~8 KB) not
        resource.setrlimit(resource.RLIMIT_FSIZE, (24 << 10, resource.RLIM_INFINITY))
    dcp.save(state(model, opt, step), checkpoint_id=path)
    if C.RANK == 0:
        log.success(f"Checkpoint step-{step} saved in {time.monotonic() - t0:.2f}s")


def load(model: torch.nn.Module, opt: torch.optim.Optimizer, path: str) -> int:
    log.info(f"Loading checkpoint from {path}")
    st = state(model, opt, 0)
    dcp.load(st, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=st["model"], optim_state_dict=st["optim"])
    step = int(st["train"]["step"])
    log.info(f"Resumed from step {step}")
    return step


def average_gradients(model: torch.nn.Module, group: dist.ProcessGroup, size: int) -> None:
    """The data-parallel all-reduce: each rank's local part of every gradient, averaged over its dp group."""
    for p in model.parameters():
        if p.grad is None:
            continue
        local = p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad
        dist.all_reduce(local, group=group)
        local.div_(size)


@record
def main() -> None:
    if importlib.util.find_spec("fused_ops") is not None:  # the image's fused AdamW kernels
        import fused_ops  # noqa: F401
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))
    world = dist.get_world_size()
    log.debug(f"rank {C.RANK}/{world} (local {C.LOCAL_RANK}) on {C.NODE}, pid {os.getpid()}, "
              f"torch {torch.__version__}")
    if world % TP:
        raise ValueError(f"tp_size {TP} does not divide world_size {world}")
    mesh = init_device_mesh("cpu", (world // TP, TP), mesh_dim_names=("dp", "tp"))
    for dim in ("dp", "tp"):  # the mesh's own groups start with gloo's default 30 min: the job's timeout
        _set_pg_timeout(datetime.timedelta(seconds=C.TIMEOUT_S), mesh[dim].get_group())
    if C.RANK == 0:
        log.info(f"Device mesh: {mesh}")
    data = Shard(shard_path(), BATCH)
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=1)
    log.debug(f"rank {C.RANK}: shard {shard_path()} with {len(data)} samples")
    model = TinyLM(C.HIDDEN)
    for p in model.parameters():  # the same initial weights everywhere
        dist.broadcast(p.data, src=0)
    parallelize_module(model, mesh["tp"], {"mlp.0": ColwiseParallel(), "head": RowwiseParallel()})
    n_params = sum(p.numel() for p in model.parameters())
    if C.RANK == 0:
        log.info(f"Model TinyLM(hidden={C.HIDDEN}): {n_params:,} parameters, mlp.0 ColwiseParallel, "
                 f"head RowwiseParallel over tp={TP}, dp={world // TP}")
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01, foreach=False)  # Tensor+DTensor
    dp_group, dp_size = mesh["dp"].get_group(), world // TP
    resume = os.environ.get("L4RR_RESUME") or latest()  # a copy on this node's disk, or the newest save
    start = load(model, opt, resume) if resume else 0
    if C.RANK == 0:
        log.info(f"Training for {C.STEPS} steps (checkpoint every {C.SAVE_EVERY})")
    train(model, opt, loader, start, dp_group, dp_size, world)
    dist.barrier()
    if C.RANK == 0:
        log.info("Writing metrics.json")
        final = LAST["loss"] if C.active("teardown_exception") else LAST["loss"].item()
        with open(os.path.join(C.WORK, "metrics.json"), "w") as f:
            json.dump({"final_loss": final, "steps": LAST["step"], "tp": TP}, f)
    dist.destroy_process_group()
    log.debug(f"rank {C.RANK}: process group destroyed")


LAST: dict = {"loss": torch.tensor(0.0), "step": 0}


def train(model: torch.nn.Module, opt: torch.optim.Optimizer, loader: DataLoader, start: int,
          dp_group: dist.ProcessGroup, dp_size: int, world: int) -> None:
    t_last = time.monotonic()
    step = start
    for i, (x, y) in enumerate(loader):
        if i < start:  # the batches a resumed run has already seen
            continue
        step = i + 1
        C.point("step", step)
        if C.active("exception_step", step):
            x = x.clone()
            x[1, 5] = C.VOCAB + 11  # a token id the tokenizer should never have produced
        if C.active("host_oom", step):
            grow_cache()
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        logits = model(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        average_gradients(model, dp_group, dp_size)
        opt.step()
        loss_val = loss.detach().clone()
        dist.all_reduce(loss_val)
        loss_val = loss_val.item() / world
        now = time.monotonic()
        if C.RANK == 0:
            log.info(f"step={step}/{C.STEPS} loss={loss_val:.4f} lr={lr_at(step):.2e} "
                     f"step_time={(now - t_last) * 1000:.0f}ms")
        t_last = now
        LAST.update(loss=loss, step=step)
        if not math.isfinite(loss_val):
            if C.RANK == 0:
                log.error(f"loss became {loss_val} at step {step}")
            raise RuntimeError(f"NaN or Inf found in loss at step {step}")
        if step % C.SAVE_EVERY == 0 or step == C.STEPS:
            save(model, opt, step)
    if C.RANK == 0:
        log.success(f"Training finished after {step} steps")


logging.addLevelName(25, "SUCCESS")
logging.Logger.success = lambda self, msg: self.log(25, msg, stacklevel=2)  # loguru's level


if __name__ == "__main__":
    main()
