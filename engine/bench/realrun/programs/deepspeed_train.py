"""A training loop that logs as DeepSpeed's engine does (real-run corpus, style ``deepspeed``).

DeepSpeed is not installed: the training is real torch DDP over gloo with torch's own
``ZeroRedundancyOptimizer`` (ZeRO stage 1: the AdamW state partitioned over the ranks), and the log lines
are DeepSpeed's, verbatim where they can be (read from deepspeedai/DeepSpeed at edaa722, version 0.19.6):
its ``LoggerFactory`` format ``[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s]
%(message)s`` on stdout (filename, line and function of the DeepSpeed source that logs each message),
``log_dist``'s ``[Rank 0] `` prefix, ``Initializing TorchBackend in DeepSpeed with backend gloo``,
``DeepSpeed info: version=...``, the ZeRO stage-1 optimizer lines, ``step=N, skipped=0, lr=[...],
mom=[...]`` and the ``ThroughputTimer`` line ``epoch=0/micro_step=N/global_step=N,
RunningAvgSamplesPerSec=...`` every ``steps_per_print`` steps, ``save_checkpoint``'s ``[Torch] Checkpoint
global_stepN is about to be saved!`` / ``Saving model checkpoint: .../mp_rank_00_model_states.pt`` with a
``zero_pp_rank_R_mp_rank_00_optim_states.pt`` per rank, the ``latest`` file and the ``zero_to_fp32.py``
recovery script in the save folder, and ``load_checkpoint``'s ``Unable to find latest file at ...`` on a
fresh start or ``[Torch] Begin Load checkpoint from ...`` when it resumes (a restarted worker resumes
from the tag in ``latest``). The user script's own lines are plain ``print``s from rank 0."""

from __future__ import annotations

import datetime
import importlib.util
import json
import logging
import math
import os
import sys
import time

import _chaos as C
import torch
import torch.distributed as dist
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

VERSION = "0.19.6"
MICRO = 8
GAS = 1
# the job's ds_config.json: train_batch_size (a config written for 6 GPUs on a run of 8 ranks)
TRAIN_BATCH = MICRO * GAS * (6 if C.active("bad_world_size") else C.WORLD)
STEPS_PER_PRINT = 2 + C.SEED % 3
CKPT = os.path.join(C.WORK, "ckpt")
LR = 3e-4
BETAS = (0.9, 0.999)
# where DeepSpeed's own lines come from: (file, line, function) of the source that logs them
SRC = {
    "cdb": ("comm.py", 797, "init_distributed"), "backend": ("comm.py", 856, "init_distributed"),
    "info": ("__init__.py", 158, "initialize"), "flops": ("engine.py", 376, "__init__"),
    "client_opt": ("engine.py", 2035, "_configure_optimizer"),
    "basic_opt": ("engine.py", 2052, "_configure_optimizer"),
    "zero": ("engine.py", 2388, "_configure_zero_optimizer"),
    "bucket": ("stage_1_and_2.py", 197, "__init__"), "allgather": ("stage_1_and_2.py", 198, "__init__"),
    "offload": ("stage_1_and_2.py", 199, "__init__"), "robin": ("stage_1_and_2.py", 200, "__init__"),
    "opt_state": ("stage_1_and_2.py", 664, "__init__"),
    "final_opt": ("engine.py", 2074, "_configure_optimizer"),
    "client_lr": ("engine.py", 1564, "_configure_lr_scheduler"),
    "lr_sched": ("engine.py", 1572, "_configure_lr_scheduler"),
    "ckpt_engine": ("torch_checkpoint_engine.py", 25, "__init__"),
    "progress": ("engine.py", 3656, "_report_progress"), "timer": ("timer.py", 264, "stop"),
    "no_latest": ("engine.py", 4313, "load_checkpoint"),
    "load_begin": ("torch_checkpoint_engine.py", 36, "load"),
    "load_end": ("torch_checkpoint_engine.py", 38, "load"),
    "zero_load": ("engine.py", 4650, "_load_zero_checkpoint"),
    "zero_read": ("engine.py", 4716, "_load_zero_checkpoint"),
    "about": ("torch_checkpoint_engine.py", 27, "create"), "saving": ("engine.py", 5263, "_save_checkpoint"),
}


class DeepSpeedLog:
    """DeepSpeed's logger (``deepspeed.utils.logging.logger``) with records that name DeepSpeed's source."""

    def __init__(self) -> None:
        self.log = logging.getLogger("DeepSpeed")
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        ch = logging.StreamHandler(stream=sys.stdout)
        fmt = "[%(asctime)s] [%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s"
        ch.setFormatter(C.NodeClock(fmt))
        self.log.handlers[:] = [ch]

    def __call__(self, where: str, msg: str, level: int = logging.INFO) -> None:
        fname, line, func = SRC[where]
        path = f"/usr/local/lib/python3.11/site-packages/deepspeed/{fname}"
        rec = self.log.makeRecord("DeepSpeed", level, path, line, msg, None, None, func)
        self.log.handle(rec)

    def dist(self, where: str, msg: str, ranks: tuple[int, ...] = (0,)) -> None:
        """``log_dist``: the message with its ``[Rank N] `` prefix, on the ranks given."""
        rank = dist.get_rank() if dist.is_initialized() else -1
        if not dist.is_initialized() or rank in ranks or ranks[0] == -1:
            self(where, f"[Rank {rank}] {msg}")


ds = DeepSpeedLog()


class Engine:
    """The parts of ``DeepSpeedEngine`` this job uses: forward, step, progress reports, checkpoints."""

    def __init__(self, model: torch.nn.Module, world: int) -> None:
        ds.dist("info", f"DeepSpeed info: version={VERSION}, git-hash=unknown, git-branch=unknown")
        assert TRAIN_BATCH == MICRO * GAS * world, (
            f"Check batch related parameters. train_batch_size is not equal "
            "to micro_batch_per_gpu * gradient_acc_step * world_size "
            f"{TRAIN_BATCH} != {MICRO} * {GAS} * {world}")
        self.module = DistributedDataParallel(model)
        ds.dist("flops", "DeepSpeed Flops Profiler Enabled: False")
        ds.dist("client_opt", "Using client Optimizer as basic optimizer")
        ds.dist("basic_opt", "DeepSpeed Basic Optimizer = AdamW")
        ds.dist("zero", "Creating torch.float32 ZeRO stage 1 optimizer")
        if dist.get_rank() == 0:
            ds("bucket", "Reduce bucket size 500000000")
            ds("allgather", "Allgather bucket size 500000000")
            ds("offload", "CPU Offload: False")
            ds("robin", "Round robin gradient partitioning: False")
        self.optimizer = ZeroRedundancyOptimizer(self.module.parameters(), optimizer_class=torch.optim.AdamW,
                                                 lr=LR, betas=BETAS, weight_decay=0.01)
        if dist.get_rank() == 0:
            ds("opt_state", "optimizer state initialized")
        ds.dist("final_opt", "DeepSpeed Final Optimizer = DeepSpeedZeroOptimizer")
        ds.dist("client_lr", "DeepSpeed using client LR scheduler")
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule)
        ds.dist("lr_sched", f"DeepSpeed LR Scheduler = {self.lr_scheduler}")
        ds.dist("progress", f"step=0, skipped=0, lr={self.get_lr()}, mom={[BETAS]}")
        ds.dist("ckpt_engine", "[Torch] Initialized with serialization = False")
        self.global_steps = 0
        self.micro_steps = 0
        self.skipped_steps = 0
        self.samples = 0
        self.t_start = 0.0
        self.elapsed = 0.0

    @staticmethod
    def schedule(step: int) -> float:
        warm = min(1.0, (step + 1) / 4)
        if C.active("nan_loss", step + 1):
            return float("inf")  # the warm-up ratio divides by warmup_num_steps=0 in this config
        return warm * 0.5 * (1 + math.cos(math.pi * step / max(C.STEPS, 1)))

    def get_lr(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.t_start = time.time()
        return self.module(x)

    def step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.module.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.lr_scheduler.step()
        self.global_steps += 1
        self.micro_steps += 1
        self.samples += MICRO * dist.get_world_size()
        duration = time.time() - self.t_start
        self.elapsed += duration
        if self.global_steps % STEPS_PER_PRINT == 0:
            ds.dist("progress", f"step={self.global_steps}, skipped={self.skipped_steps}, "
                                f"lr={self.get_lr()}, mom={[BETAS]}")
            if dist.get_rank() == 0:
                avg = self.samples / max(self.elapsed, 1e-9)
                ds("timer", f"epoch=0/micro_step={self.micro_steps}/global_step={self.global_steps}, "
                            f"RunningAvgSamplesPerSec={avg}, "
                            f"CurrSamplesPerSec={MICRO * dist.get_world_size() / duration}, "
                            f"MemAllocated=0.0GB, MaxMemAllocated=0.0GB")

    def save_checkpoint(self, save_dir: str, tag: str, client_state: dict) -> None:
        rank = dist.get_rank()
        ds.dist("about", f"[Torch] Checkpoint {tag} is about to be saved!")
        C.point("save", self.global_steps)
        path = os.path.join(save_dir, tag)
        os.makedirs(path, exist_ok=True)
        if rank == 0:
            save_path = os.path.join(path, "mp_rank_00_model_states.pt")
            ds.dist("saving", f"Saving model checkpoint: {save_path}")
            torch.save({"module": self.module.module.state_dict(),
                        "lr_scheduler": self.lr_scheduler.state_dict(), "global_steps": self.global_steps,
                        "skipped_steps": self.skipped_steps, "dp_world_size": dist.get_world_size(),
                        "mp_world_size": 1, **client_state}, save_path)
        torch.save({"optimizer_state_dict": self.optimizer.optim.state_dict(),
                    "ds_config": {"zero_optimization": {"stage": 1}}, "ds_version": VERSION},
                   os.path.join(path, f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"))
        dist.barrier()
        if rank == 0:
            with open(os.path.join(path, "zero_to_fp32.py"), "w") as f:  # the recovery script
                f.write("#!/usr/bin/env python\n# usage: python zero_to_fp32.py . pytorch_model.bin\n")
            with open(os.path.join(save_dir, "latest"), "w") as fd:
                fd.write(tag)
        dist.barrier()

    def load_checkpoint(self, load_dir: str, tag: str | None = None) -> tuple[str | None, dict | None]:
        if tag is None:
            latest_path = os.path.join(load_dir, "latest")
            if not os.path.isfile(latest_path):
                ds("no_latest", f"Unable to find latest file at {latest_path}, if trying to load latest "
                   "checkpoint please ensure this file exists or pass an explicit checkpoint tag when "
                   "loading a checkpoint.", logging.WARNING)
                return None, None
            with open(latest_path) as fd:
                tag = fd.read().strip()
        path = os.path.join(load_dir, tag, "mp_rank_00_model_states.pt")
        ds.dist("load_begin", f"[Torch] Begin Load checkpoint from {path}...")
        state = torch.load(path, weights_only=False)
        ds.dist("load_end", f"[Torch] End Load checkpoint from {path}...")
        self.module.module.load_state_dict(state["module"])
        self.lr_scheduler.load_state_dict(state["lr_scheduler"])
        for group, lr in zip(self.optimizer.param_groups, self.lr_scheduler.get_last_lr(), strict=True):
            group["lr"] = lr  # the schedule's rate at the step it resumes from
        self.global_steps = self.micro_steps = int(state["global_steps"])
        rank = dist.get_rank()
        ds("zero_load", f"loading 1 zero partition checkpoints for rank {rank}")
        zero = torch.load(os.path.join(load_dir, tag, f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"),
                          weights_only=False)
        self.optimizer.optim.load_state_dict(zero["optimizer_state_dict"])
        ds("zero_read", f"successfully read 1 ZeRO state_dicts for rank {rank}")
        client = {k: v for k, v in state.items() if k not in ("module", "lr_scheduler")}
        return os.path.join(load_dir, tag), client


def init_distributed() -> None:
    """``deepspeed.init_distributed`` under torchrun: the env:// process group over gloo."""
    ds("cdb", "cdb=None")
    ds("backend", "Initializing TorchBackend in DeepSpeed with backend gloo")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))


def say(msg: str) -> None:
    if dist.get_rank() == 0:
        print(msg, flush=True)


@record
def main() -> None:
    if importlib.util.find_spec("fused_ops") is not None:  # the image's fused Adam (FusedAdam)
        import fused_ops  # noqa: F401
    init_distributed()
    world = dist.get_world_size()
    data = Shard(shard_path(), MICRO)
    loader = DataLoader(data, batch_size=MICRO, shuffle=False, num_workers=1)
    say(f"train: {len(data)} samples per rank, {len(loader)} steps, world_size={world}")
    engine = Engine(TinyLM(C.HIDDEN), world)
    resume = os.environ.get("L4RR_RESUME")  # a global_stepN folder copied to this node's disk
    if resume:
        load_path, client = engine.load_checkpoint(os.path.dirname(resume), os.path.basename(resume))
    else:
        load_path, client = engine.load_checkpoint(CKPT)
    start = engine.global_steps
    if load_path is not None:
        say(f"resumed from {load_path} at global step {start}")
    step = start
    loss = torch.tensor(0.0)
    for i, (x, y) in enumerate(loader):
        if i < start:  # the batches a resumed run has already seen
            continue
        step = engine.global_steps + 1
        C.point("step", step)
        if C.active("exception_step", step):
            x = x.clone()
            x[2, 5] = C.VOCAB + 11  # a token id the tokenizer should never have produced
        if C.active("host_oom", step):
            grow_cache()
        logits = engine.forward(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        loss.backward()
        engine.step()
        say(f"global_step {step} | loss {loss.item():.4f} | lr {engine.get_lr()[0]:.3e}")
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"non-finite loss {loss.item()} at global_step {step}, aborting")
        if step % C.SAVE_EVERY == 0 or step == C.STEPS:  # every save_interval and at the end of training
            engine.save_checkpoint(CKPT, f"global_step{step}", {"epoch": 0})
    say(f"training done: {step} steps, final loss {loss.item():.4f}")
    dist.barrier()
    dist.destroy_process_group()
    if C.RANK == 0:  # after the process group is gone: the job's summary for the dashboard
        final = loss if C.active("teardown_exception") else loss.item()
        with open(os.path.join(C.WORK, "ds_metrics.json"), "w") as f:
            json.dump({"final_loss": final, "global_steps": step}, f)


if __name__ == "__main__":
    main()
