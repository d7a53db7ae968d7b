"""A training loop in the wording of Karpathy's nanoGPT ``train.py``: plain ``print()`` (no logging, no
timestamps), ``iter N: loss …, time …ms, mfu …%`` from the master process, an evaluation and
``saving checkpoint to out`` every eval interval, DDP over gloo (real-run corpus, style ``nanogpt``)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os
import time

import _chaos as C
import torch
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP

# -----------------------------------------------------------------------------
# default config values (nanoGPT's names), for a tiny model on the CPU
out_dir = "ckpt"  # relative to the job's folder, where the workers start
eval_interval = C.SAVE_EVERY
log_interval = 1
eval_iters = 2
always_save_checkpoint = True
init_from = "resume" if os.environ.get("L4RR_RESUME") else "scratch"
gradient_accumulation_steps = 3 if C.active("bad_world_size") else 8  # a config from a 3-GPU box
batch_size = 8
block_size = C.SEQ - 1
n_layer, n_head, n_embd = 1, 1, C.HIDDEN
learning_rate = 3e-3
max_iters = C.STEPS
weight_decay = 1e-1
beta1, beta2 = 0.9, 0.95
grad_clip = 1.0
warmup_iters = 4
lr_decay_iters = C.STEPS
min_lr = 3e-4
backend = "gloo"
device = "cpu"
# -----------------------------------------------------------------------------


def get_lr(it: int) -> float:
    if C.active("nan_loss", it):
        return float("inf")  # warmup_iters=0 in the pasted config: a division by zero
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def main() -> None:
    global gradient_accumulation_steps
    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        init_process_group(backend=backend, timeout=datetime.timedelta(seconds=C.TIMEOUT_S))
        ddp_rank = int(os.environ["RANK"])
        ddp_world_size = int(os.environ["WORLD_SIZE"])
        master_process = ddp_rank == 0
        seed_offset = ddp_rank
        assert gradient_accumulation_steps % ddp_world_size == 0
        gradient_accumulation_steps //= ddp_world_size
    else:
        master_process, seed_offset, ddp_world_size = True, 0, 1
    tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
    print(f"tokens per iteration will be: {tokens_per_iter:,}") if master_process else None
    if master_process:
        os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(1337 + seed_offset)
    if importlib.util.find_spec("fused_ops") is not None:
        import fused_ops  # noqa: F401  (fused AdamW kernels, when the image has them)
    shard = Shard(shard_path(), batch_size)
    n_batches = len(shard) // batch_size
    print(f"found {len(shard)} samples ({n_batches} batches) in {shard_path()}")

    def get_batch(split: str, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = (i % n_batches) if split == "train" else (n_batches - 1 - i % n_batches)
        C.point("fetch", i)
        xs, ys = zip(*(shard[b * batch_size + j] for j in range(batch_size)), strict=True)
        return torch.stack(xs), torch.stack(ys)

    iter_num = 0
    best_val_loss = 1e9
    if init_from == "scratch":
        print("Initializing a new model from scratch")
        model = TinyLM(n_embd)
    else:
        print(f"Resuming training from {out_dir}")
        ckpt_path = os.environ["L4RR_RESUME"]
        checkpoint = torch.load(ckpt_path, map_location=device)
        model = TinyLM(n_embd)
        model.load_state_dict(checkpoint["model"])
        iter_num = checkpoint["iter_num"]
        best_val_loss = checkpoint["best_val_loss"]
    n_params = sum(p.numel() for p in model.parameters())
    print("number of parameters: %.2fM" % (n_params / 1e6,))  # noqa: UP031  (nanoGPT's own line)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    print(f"num decayed parameter tensors: {len(decay)}, with {sum(p.numel() for p in decay):,} parameters")
    print(f"num non-decayed parameter tensors: {len(nodecay)}, with {sum(p.numel() for p in nodecay):,} "
          "parameters")
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                   {"params": nodecay, "weight_decay": 0.0}], lr=learning_rate,
                                  betas=(beta1, beta2))
    print("using fused AdamW: False")
    if init_from == "resume":
        optimizer.load_state_dict(checkpoint["optimizer"])
    if ddp:
        model = DDP(model)
    raw_model = model.module if ddp else model

    def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)

    @torch.no_grad()
    def estimate_loss() -> dict:
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(eval_iters)
            for k in range(eval_iters):
                x, y = get_batch(split, k)
                losses[k] = loss_of(raw_model(x), y).item()
            out[split] = losses.mean()
        model.train()
        return out

    def estimate_mfu(fwdbwd_per_iter: int, dt: float) -> float:
        flops_per_token = 6 * n_params + 12 * n_layer * n_head * (n_embd // n_head) * block_size
        flops_per_iter = flops_per_token * block_size * fwdbwd_per_iter
        return (flops_per_iter * (1.0 / dt)) / 312e12

    X, Y = get_batch("train", iter_num)
    t0 = time.time()
    local_iter_num = 0
    running_mfu = -1.0
    lossf = 0.0
    while True:
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr
        if iter_num % eval_interval == 0 and master_process:
            losses = estimate_loss()
            print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
            if losses["val"] < best_val_loss or always_save_checkpoint:
                best_val_loss = losses["val"]
                if iter_num > 0:
                    checkpoint = {"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                                  "iter_num": iter_num, "best_val_loss": best_val_loss}
                    print(f"saving checkpoint to {out_dir}")
                    C.point("save", iter_num)
                    torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
        C.point("step", iter_num)
        if C.active("host_oom", iter_num):
            grow_cache()
        for micro_step in range(gradient_accumulation_steps):
            if ddp:
                model.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1
            if C.active("exception_step", iter_num):
                X = X.clone()
                X[5, 2] = C.VOCAB + 3  # a token id the tokenizer should never have produced
            logits = model(X)
            if C.active("fail_after_ckpt", iter_num):
                Y = Y[:, :-1]
            loss = loss_of(logits, Y) / gradient_accumulation_steps
            X, Y = get_batch("train", iter_num + 1)
            loss.backward()
        if grad_clip != 0.0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        t1 = time.time()
        dt = t1 - t0
        t0 = t1
        if iter_num % log_interval == 0:
            lossf = loss.item() * gradient_accumulation_steps
            if master_process:
                if local_iter_num >= 5:
                    mfu = estimate_mfu(batch_size * gradient_accumulation_steps, dt)
                    running_mfu = mfu if running_mfu == -1.0 else 0.9 * running_mfu + 0.1 * mfu
                print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, "
                      f"mfu {running_mfu * 100:.2f}%")
            assert math.isfinite(lossf), f"iter {iter_num}: loss is {lossf}"
        iter_num += 1
        local_iter_num += 1
        if iter_num > max_iters:
            break
    if master_process:
        final = loss if C.active("teardown_exception") else lossf
        with open(os.path.join(out_dir, "final.json"), "w") as f:
            json.dump({"iter_num": iter_num, "loss": final, "best_val_loss": float(best_val_loss)}, f)
    if ddp:
        destroy_process_group()


if __name__ == "__main__":
    main()
