"""Plain DistributedDataParallel loop with Python logging (real-run corpus, style ``ddp``)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os
import time

import _chaos as C
import torch
import torch.distributed as dist
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

log = C.logger("trainer", f"%(asctime)s %(levelname)s [rank{C.RANK}] %(name)s: %(message)s")
MICRO = 8
TP = 3 if C.active("bad_world_size") else 1  # the job's config: tensor-parallel degree


def save(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    path = os.path.join(C.WORK, "ckpt", f"step_{step:05d}")
    if dist.get_rank() == 0:
        log.info("saving checkpoint to %s", path)
        C.point("save", step)
        os.makedirs(path, exist_ok=True)
        torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step},
                   os.path.join(path, "model.pt"))
        log.info("checkpoint saved: %s (%d bytes)", path, os.path.getsize(os.path.join(path, "model.pt")))
    dist.barrier()


@record
def main() -> None:
    log.info("starting on %s pid=%d torch=%s local_rank=%d", C.NODE, os.getpid(), torch.__version__,
             C.LOCAL_RANK)
    if importlib.util.find_spec("fused_ops") is not None:
        import fused_ops  # noqa: F401  (fused optimizer kernels, when the image has them)
        log.info("using fused optimizer kernels")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))
    world = dist.get_world_size()
    log.info("process group ready: backend=gloo world_size=%d timeout=%ss", world, C.TIMEOUT_S)
    if world % TP:
        raise ValueError(f"world size {world} is not divisible by tensor_parallel_size {TP}")
    path = shard_path()
    log.info("loading data shard %s", path)
    data = Shard(path, MICRO)
    loader = DataLoader(data, batch_size=MICRO, shuffle=False, num_workers=1)
    log.info("dataset ready: %d samples, %d batches per epoch", len(data), len(loader))
    model = TinyLM(C.HIDDEN)
    resume = os.environ.get("L4RR_RESUME")
    start = 0
    if resume:
        log.info("resuming from %s", resume)
        state = torch.load(resume, weights_only=True)
        model.load_state_dict(state["model"])
        start = int(state["step"])
        log.info("loaded checkpoint at step %d", start)
    ddp = DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=3e-3, weight_decay=0.01)
    log.info("model ready: %d parameters, hidden=%d", sum(p.numel() for p in model.parameters()), C.HIDDEN)
    total = start + len(loader)
    t_last = time.time()
    loss = torch.tensor(0.0)
    for step, (x, y) in enumerate(loader, start + 1):
        C.point("step", step)
        if C.active("exception_step", step):
            x[0, 3] = C.VOCAB + 7  # a token id the tokenizer should never have produced
        if C.active("host_oom", step):
            grow_cache()
        logits = ddp(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        lr = 3e-3 * min(1.0, step / 5) * 0.5 * (1 + math.cos(math.pi * step / total))
        if C.active("nan_loss", step):
            lr = float("inf")  # the schedule divides by a zero warm-up
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        now = time.time()
        log.info("step %d/%d loss=%.4f lr=%.3e grad_norm=%.3f (%.3fs/it)", step, total, loss.item(), lr,
                 gnorm.item(), now - t_last)
        t_last = now
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}, stopping")
        if step % C.SAVE_EVERY == 0:
            save(model, opt, step)
    log.info("training finished after %d steps", total)
    if dist.get_rank() == 0:
        final = loss if C.active("teardown_exception") else loss.item()
        with open(os.path.join(C.WORK, "summary.json"), "w") as f:
            json.dump({"final_loss": final, "steps": total}, f)
        log.info("wrote %s", os.path.join(C.WORK, "summary.json"))
    dist.barrier()
    dist.destroy_process_group()
    log.info("done")


if __name__ == "__main__":
    main()
