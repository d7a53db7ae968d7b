"""A Lightning Fabric loop (real-run corpus, style ``fabric``): ``lightning.fabric.Fabric`` with the DDP
strategy on the CPU accelerator, launched under torchrun (Fabric reads the torchelastic environment and
starts no processes of its own), ``fabric.print`` progress from global rank 0, ``fabric.save``/
``fabric.load`` checkpoints (a restarted worker resumes from the newest one) and whatever Fabric itself
warns and reports on the way."""

from __future__ import annotations

import datetime
import glob
import importlib.util
import json
import math
import os
import time

import _chaos as C
import torch
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from torch.utils.data import DataLoader

BATCH = 8
# the job's config: the global batch it was tuned for (8 per process on 8 processes, or 48 from elsewhere)
GLOBAL_BATCH = 48 if C.active("bad_world_size") else 64
CKPT = os.path.join(C.WORK, "ckpt")


def latest_checkpoint() -> str | None:
    found = sorted(glob.glob(os.path.join(CKPT, "step-*.pt")))
    return found[-1] if found else None


def main() -> None:
    if importlib.util.find_spec("fused_ops") is not None:
        import fused_ops  # noqa: F401  (fused optimizer kernels, when the image has them)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "2"))
    fabric = Fabric(accelerator="cpu", devices=local_world, num_nodes=C.WORLD // local_world,
                    strategy=DDPStrategy(process_group_backend="gloo",
                                         timeout=datetime.timedelta(seconds=C.TIMEOUT_S)))
    fabric.launch()
    fabric.seed_everything(C.SEED + fabric.global_rank)
    fabric.print(f"fabric: world_size={fabric.world_size} num_nodes={C.WORLD // local_world} "
                 f"strategy=ddp accelerator=cpu")
    if GLOBAL_BATCH % (fabric.world_size * BATCH):
        raise ValueError(f"global batch size {GLOBAL_BATCH} is not divisible by world_size * batch_size "
                         f"({fabric.world_size} * {BATCH})")
    data = Shard(shard_path(), BATCH)
    print(f"[rank {fabric.global_rank}] loaded {len(data)} samples from {shard_path()}")
    loader = fabric.setup_dataloaders(DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=1),
                                      use_distributed_sampler=False)
    model = TinyLM(C.HIDDEN)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    model, optimizer = fabric.setup(model, optimizer)
    fabric.print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters, hidden={C.HIDDEN}")
    state = {"model": model, "optimizer": optimizer, "step": 0}
    resume = os.environ.get("L4RR_RESUME") or latest_checkpoint()
    if resume:
        fabric.print(f"resuming from {resume}")
        rest = fabric.load(resume, {"model": model, "optimizer": optimizer})
        state["step"] = int(rest.get("step", 0))
        fabric.print(f"resumed at step {state['step']}")
    start = state["step"]
    total = len(loader)
    t_last = time.perf_counter()
    loss = torch.tensor(0.0)
    for step, (x, y) in enumerate(loader, 1):
        if step <= start:  # the batches a resumed run has already seen
            continue
        C.point("step", step)
        if C.active("exception_step", step):
            x = x.clone()
            x[2, 6] = C.VOCAB + 11  # a token id the tokenizer should never have produced
        if C.active("host_oom", step):
            grow_cache()
        logits = model(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        optimizer.zero_grad()
        fabric.backward(loss)
        fabric.clip_gradients(model, optimizer, max_norm=1.0)
        lr = 3e-3 * min(1.0, step / 4)
        if C.active("nan_loss", step):
            lr = float("inf")  # the schedule divides by a zero warm-up
        for g in optimizer.param_groups:
            g["lr"] = lr
        optimizer.step()
        now = time.perf_counter()
        reduced = fabric.all_reduce(loss.detach(), reduce_op="mean")
        fabric.print(f"Iteration {step}/{total} | train loss {reduced.item():.4f} | lr {lr:.2e} | "
                     f"{(now - t_last) * 1000:.1f} ms")
        t_last = now
        if not math.isfinite(reduced.item()):
            raise ValueError(f"non-finite loss ({reduced.item()}) at iteration {step}")
        if step % C.SAVE_EVERY == 0:
            state["step"] = step
            path = os.path.join(CKPT, f"step-{step:05d}.pt")
            fabric.print(f"saving checkpoint {path}")
            if fabric.global_rank == 0:
                C.point("save", step)
            fabric.save(path, state)
    fabric.print(f"training finished: {total} iterations")
    fabric.barrier()
    if fabric.global_rank == 0:
        final = loss if C.active("teardown_exception") else loss.item()
        with open(os.path.join(C.WORK, "results.json"), "w") as f:
            json.dump({"final_loss": final, "iterations": total}, f)
        fabric.print(f"wrote {os.path.join(C.WORK, 'results.json')}")


if __name__ == "__main__":
    main()
