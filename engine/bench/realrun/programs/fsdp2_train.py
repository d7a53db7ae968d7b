"""A PyTorch FSDP2 loop (real-run corpus, style ``fsdp2``): ``torch.distributed.fsdp.fully_shard`` over a
1-D ``DeviceMesh`` on the CPU with gloo (every parameter a sharded ``DTensor``), real
``torch.distributed.checkpoint`` saves of the sharded model and optimizer state (``ckpt/step_NNNNNN``,
one ``.distcp`` per rank, every save period and at the end of training) and loads of the newest complete one
(a restarted worker resumes from it). Its own lines are plain ``print``s behind a ``[rank N]`` prefix (rank
0's progress, every rank's set-up), with the node's clock after the prefix where the node has one; torch's
own warnings come as they come."""

from __future__ import annotations

import datetime
import glob
import importlib.util
import json
import math
import os
import resource
import time

import _chaos as C
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader

BATCH = 8
# the job's config: tensor_parallel_size (3 in a config copied from a 24-GPU run) and the mesh it implies
TP = 3 if C.active("bad_world_size") else 1
CKPT = os.path.join(C.WORK, "ckpt")
LR = 2e-3


def log(msg: str, every_rank: bool = False) -> None:
    if every_rank or C.RANK == 0:
        stamp = C.stamp()
        print(f"[rank {C.RANK}] {stamp + ' ' if stamp else ''}{msg}", flush=True)


def latest() -> str | None:
    """The newest complete DCP checkpoint (one with its ``.metadata``)."""
    done = [d for d in glob.glob(os.path.join(CKPT, "step_*"))
            if os.path.isfile(os.path.join(d, ".metadata"))]
    return max(done, key=lambda d: int(d.rsplit("_", 1)[1])) if done else None


def lr_at(step: int) -> float:
    if C.active("nan_loss", step):
        return float("inf")  # lr_warmup_steps=0 in this config: the warm-up factor divides by zero
    return LR * min(1.0, step / 3) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / C.STEPS)))


def state(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> dict:
    model_sd, optim_sd = get_state_dict(model, opt)
    return {"model": model_sd, "optim": optim_sd, "train": {"step": step}}


def save(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    path = os.path.join(CKPT, f"step_{step:06d}")
    log(f"saving checkpoint step {step} to {path}")
    t0 = time.monotonic()
    C.point("save", step)
    if C.active("disk_full_ckpt", step):  # each rank writes only its shard: a smaller quota fills
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 << 10, resource.RLIM_INFINITY))
    dcp.save(state(model, opt, step), checkpoint_id=path)
    log(f"checkpoint saved: {path} ({time.monotonic() - t0:.2f}s)")


def load(model: torch.nn.Module, opt: torch.optim.Optimizer, path: str) -> int:
    log(f"resuming from checkpoint {path}")
    t0 = time.monotonic()
    st = state(model, opt, 0)
    dcp.load(st, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=st["model"], optim_state_dict=st["optim"])
    step = int(st["train"]["step"])
    log(f"resumed at step {step} ({time.monotonic() - t0:.2f}s)")
    return step


@record
def main() -> None:
    if importlib.util.find_spec("fused_ops") is not None:  # the image's fused AdamW kernels
        import fused_ops  # noqa: F401
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))
    world = dist.get_world_size()
    log(f"pid {os.getpid()} on {C.NODE}: local_rank {C.LOCAL_RANK}, world_size {world}", every_rank=True)
    if world % TP:
        raise ValueError(f"world_size ({world}) must be divisible by tensor_parallel_size ({TP})")
    mesh = init_device_mesh("cpu", (world // TP, TP), mesh_dim_names=("dp_shard", "tp"))
    log(f"device mesh: {mesh}")
    data = Shard(shard_path(), BATCH)
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=1)
    log(f"data: {shard_path()} ({len(data)} samples, {len(loader)} batches)", every_rank=True)
    model = TinyLM(C.HIDDEN)
    for p in model.parameters():  # the same initial weights everywhere (what FSDP1's sync_module_states did)
        dist.broadcast(p.data, src=0)
    for module in (model.embed, model.mlp, model.head):
        fully_shard(module, mesh=mesh["dp_shard"])
    fully_shard(model, mesh=mesh["dp_shard"])
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: TinyLM(hidden={C.HIDDEN}) {n_params:,} params, fully_shard over dp_shard={world // TP}")
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.05, foreach=True)
    resume = os.environ.get("L4RR_RESUME") or latest()  # a copy on this node's disk, or the newest save
    start = load(model, opt, resume) if resume else 0
    log(f"training from step {start + 1} to {C.STEPS}")
    step, t_last = start, time.monotonic()
    loss = torch.tensor(0.0)
    for i, (x, y) in enumerate(loader):
        if i < start:  # the batches a resumed run has already seen
            continue
        step = i + 1
        C.point("step", step)
        if C.active("exception_step", step):
            x = x.clone()
            x[4, 2] = C.VOCAB + 3  # a token id the tokenizer should never have produced
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
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).full_tensor()
        opt.step()
        loss_val = loss.detach().clone()
        dist.all_reduce(loss_val)
        loss_val = loss_val.item() / world
        now = time.monotonic()
        log(f"step {step}/{C.STEPS} | loss {loss_val:.4f} | grad_norm {gnorm.item():.3f} | "
            f"lr {lr_at(step):.2e} | {(now - t_last) * 1000:.0f} ms")
        t_last = now
        assert math.isfinite(loss_val), f"loss diverged to {loss_val} at step {step}"
        if step % C.SAVE_EVERY == 0 or step == C.STEPS:
            save(model, opt, step)
    log(f"training complete: {step} steps")
    dist.barrier()
    if C.RANK == 0:  # the run's summary, written while the others leave the process group
        final = loss if C.active("teardown_exception") else loss.item()
        with open(os.path.join(C.WORK, "run_summary.json"), "w") as f:
            json.dump({"final_loss": final, "steps": step, "world_size": world}, f)
    dist.destroy_process_group()
    log("destroyed process group", every_rank=True)


if __name__ == "__main__":
    main()
