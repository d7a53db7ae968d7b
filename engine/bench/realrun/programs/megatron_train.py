"""A Megatron-LM-style pretraining loop: its print wording, per-iteration summary line from the last
rank, gradients all-reduced by hand (real-run corpus, style ``megatron``)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os
import signal
import sys
import time

import _chaos as C
import torch
import torch.distributed as dist
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.utils.data import DataLoader

MICRO = 8
TP = 3 if C.active("bad_world_size") else 1


def print_rank_0(msg: str) -> None:
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(msg, flush=True)


def print_rank_last(msg: str) -> None:
    if not dist.is_initialized() or dist.get_rank() == dist.get_world_size() - 1:
        print(msg, flush=True)


def print_datetime(what: str) -> None:
    dist.barrier()
    print_rank_0(f"[{what}] datetime: {C.stamp()} ")


def on_sigterm(signum: int, frame: object) -> None:
    print(f"[{C.stamp()}] rank {C.RANK}: received signal {signum} (SIGTERM), exiting training loop",
          flush=True)
    sys.exit(1)


def save_checkpoint(iteration: int, model: torch.nn.Module, opt: DistributedAdam) -> None:
    ckpt = os.path.join(C.WORK, "ckpt")
    print_rank_0(f"saving checkpoint at iteration {iteration:7d} to {ckpt}")
    if dist.get_rank() == 0:
        C.point("save", iteration)
        folder = os.path.join(ckpt, f"iter_{iteration:07d}", "mp_rank_00")
        os.makedirs(folder, exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "iteration": iteration},
                   os.path.join(folder, "model_optim_rng.pt"))
        with open(os.path.join(ckpt, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(iteration))
    dist.barrier()
    print_rank_0(f"  successfully saved checkpoint at iteration {iteration:7d} to {ckpt}")


class DistributedAdam:
    """Adam over the all-reduced gradients, written out as Megatron's own optimizer wrapper does (and
    without torch.optim, whose first use costs every rank a torch._dynamo import)."""

    def __init__(self, params: list[torch.nn.Parameter], lr: float, betas: tuple[float, float] = (0.9, 0.95),
                 eps: float = 1e-8) -> None:
        self.params, self.lr, self.betas, self.eps, self.t = params, lr, betas, eps, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            m.mul_(b1).add_(p.grad, alpha=1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            denom = (v / (1 - b2 ** self.t)).sqrt_().add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / (1 - b1 ** self.t))

    def state_dict(self) -> dict:
        return {"step": self.t, "exp_avg": self.m, "exp_avg_sq": self.v, "lr": self.lr}


def allreduce_grads(model: torch.nn.Module) -> None:
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad /= dist.get_world_size()


def main() -> None:
    signal.signal(signal.SIGTERM, on_sigterm)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))
    world = dist.get_world_size()
    print_rank_0("> initializing torch distributed ...")
    if world % TP:
        raise RuntimeError(f"world_size ({world}) is not divisible by tensor_model_parallel_size ({TP})")
    print_rank_0(f"using world size: {world}, data-parallel size: {world // TP}, context-parallel size: 1, "
                 f"tensor-model-parallel size: {TP}, pipeline-model-parallel size: 1 ")
    print_rank_0(f"> initialized tensor model parallel with size {TP}")
    print_rank_0("> initialized pipeline model parallel with size 1")
    if importlib.util.find_spec("fused_ops") is not None:
        print(f"> compiling and loading fused kernels on {C.NODE} ...", flush=True)
        import fused_ops  # noqa: F401
    print_rank_0("> setting random seeds to 1234 ...")
    torch.manual_seed(1234)
    print_datetime("after megatron is initialized")
    print_rank_0("> building train, validation, and test datasets ...")
    data = Shard(shard_path(), MICRO)
    loader = DataLoader(data, batch_size=MICRO, shuffle=False, num_workers=1)
    print(f" > rank {dist.get_rank()} on {C.NODE}: loaded {len(data)} samples from {shard_path()}",
          flush=True)
    print_rank_0("> finished creating GPT datasets ...")
    print_rank_0("building GPT model ...")
    model = TinyLM(C.HIDDEN)
    if C.LOCAL_RANK == 0:
        print(f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): "
              f"{sum(p.numel() for p in model.parameters())}", flush=True)
    resume = os.environ.get("L4RR_RESUME")
    start = 0
    if resume:
        print_rank_0(f" loading checkpoint from {resume}")
        state = torch.load(resume, weights_only=True)
        model.load_state_dict(state["model"])
        start = int(state.get("iteration", state.get("step", 0)))
        print_rank_0(f"  successfully loaded checkpoint from {resume} at iteration {start}")
    for p in model.parameters():  # all data-parallel ranks start from rank 0's weights
        dist.broadcast(p.data, 0)
    opt = DistributedAdam(list(model.parameters()), lr=3e-3)
    print_rank_0("> learning rate decay style: cosine")
    print_datetime("after model, optimizer, and learning rate scheduler are built")
    print_rank_0("done with setup ...")
    print_rank_0("training ...")
    print_datetime("before the start of training step")
    total = start + len(loader)
    t_last = time.time()
    loss = torch.tensor(0.0)
    nan_iters = 0
    for it, (x, y) in enumerate(loader, start + 1):
        C.point("step", it)
        if C.active("exception_step", it):
            x[1, 5] = C.VOCAB + 11
        if C.active("host_oom", it):
            grow_cache()
        logits = model(x)
        if C.active("fail_after_ckpt", it):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        allreduce_grads(model)
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = 3e-3 * min(1.0, it / 5) * 0.5 * (1 + math.cos(math.pi * it / total))
        if C.active("nan_loss", it):
            lr = float("inf")
        opt.lr = lr
        opt.step()
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        reduced /= world
        if math.isnan(reduced.item()):
            nan_iters += 1
        now = time.time()
        print_rank_last(
            f" [{C.stamp(now)}] iteration {it:8d}/{total:8d} | consumed samples: {it * MICRO * world:12d} | "
            f"elapsed time per iteration (ms): {(now - t_last) * 1000:.1f} | learning rate: {lr:.6E} | "
            f"global batch size: {MICRO * world:5d} | lm loss: {reduced.item():.6E} | loss scale: 1.0 | "
            f"grad norm: {gnorm.item():.3f} | number of skipped iterations: {nan_iters:3d} | "
            f"number of nan iterations: {nan_iters:3d} |")
        t_last = now
        if math.isnan(loss.item()):
            raise AssertionError(f"Rank {dist.get_rank()}: found NaN in local forward loss calculation. "
                                 f"Device: cpu, node: {C.NODE}")
        if it % C.SAVE_EVERY == 0:
            save_checkpoint(it, model, opt)
    print_datetime("after training is done")
    if dist.get_rank() == 0:
        stats = {"iterations": total, "lm loss": loss if C.active("teardown_exception") else loss.item()}
        with open(os.path.join(C.WORK, "train_stats.json"), "w") as f:
            json.dump(stats, f)
    print_rank_0("> exiting: training finished")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
