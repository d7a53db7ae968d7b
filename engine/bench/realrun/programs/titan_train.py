"""A training loop in the wording of torchtitan's ``train.py`` (real-run corpus, style ``titan``): its logger
(``[titan] <time> - root - INFO - ...`` on stdout, every rank), ``Building 1-D device mesh``, ``Building
llama3 debugmodel with TransformerModelArgs(...)``, the metrics line ``step: N  loss: ...  tps: ...``,
torchtitan's ``CheckpointManager`` messages around real ``torch.distributed.checkpoint`` saves and loads
(a save at step 1, every interval and at the last step; a restarted worker loads the newest complete
``step-N`` folder), ``Sleeping 2 seconds for other ranks to complete`` and ``Training completed``.
The messages are torchtitan's own (torchtitan/train.py, components/checkpoint.py, components/metrics.py,
distributed/parallel_dims.py, models/llama3/parallelize_llama.py); the model is the harness's tiny LM
under DDP over gloo on the CPU."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import importlib.util
import json
import logging
import os
import re
import resource
import sys
import time

import _chaos as C
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from torch.distributed.checkpoint.default_planner import DefaultSavePlanner
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

logger = logging.getLogger()
BATCH = 8
WARMUP = 2
# the job's config: [parallelism] tensor_parallel_degree (a 3-way TP config pasted from another cluster)
TP = 3 if C.active("bad_world_size") else 1
CKPT = os.path.join(C.WORK, "ckpt")
# [comm] init_timeout_seconds and train_timeout_seconds: a long one while the ranks start, the job's
# collective timeout from the first step on
INIT_TIMEOUT_S = 30


def init_logger() -> None:
    """torchtitan.tools.logging.init_logger, with the node's clock."""
    logger.setLevel(logging.INFO)
    logger.handlers.clear()
    ch = logging.StreamHandler(sys.stdout)
    ch.setLevel(logging.INFO)
    fmt = "[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s"
    if C.TS_FORMAT == "none":
        fmt = "[titan] %(name)s - %(levelname)s - %(message)s"
    ch.setFormatter(C.NodeClock(fmt))
    logger.addHandler(ch)
    os.environ["KINETO_LOG_LEVEL"] = "5"


@dataclasses.dataclass
class TransformerModelArgs:
    _enforced: str = "This field is used to enforce all fields have defaults."
    dim: int = 256
    n_layers: int = 6
    n_heads: int = 16
    n_kv_heads: int | None = None
    vocab_size: int = -1
    multiple_of: int = 256
    ffn_dim_multiplier: float | None = None
    norm_eps: float = 1e-5
    rope_theta: float = 500000
    max_seq_len: int = 2048
    depth_init: bool = True
    use_flex_attn: bool = False
    attn_mask_type: str = "causal"
    eos_id: int = 0


def parallel_dims(world_size: int) -> int:
    """torchtitan's ParallelDims validation; returns the data-parallel degree."""
    dp_replicate, dp_shard, cp, tp, pp = world_size // TP, 1, 1, TP, 1
    assert dp_replicate * dp_shard * cp * tp * pp == world_size, (
        f"Invalid parallel dims: dp_replicate({dp_replicate}) * dp_shard({dp_shard}) * "
        f"cp({cp}) * tp({tp}) * pp({pp}) != WORLD_SIZE({world_size})"
    )
    return dp_replicate


def build_mesh(dp_replicate: int) -> None:
    names, dims = ["dp_replicate"], [dp_replicate]
    logger.info(f"Building {len(dims)}-D device mesh with {names}, {dims}")


def set_pg_timeouts(timeout: datetime.timedelta) -> None:
    """torchtitan.distributed.utils.set_pg_timeouts (the world group is this job's only one)."""
    logger.info(f"Synchronizing and adjusting timeout for all ProcessGroups to {timeout}")
    dist.barrier()
    dist.distributed_c10d._set_pg_timeout(timeout, None)


class CheckpointManager:
    """The part of torchtitan's CheckpointManager this job uses: sync DCP saves every ``interval`` steps,
    at step 1 (to fail fast) and at the last step, and a load of the newest complete checkpoint."""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, trainer: Trainer) -> None:
        self.model, self.optimizer, self.trainer = model, optimizer, trainer
        self.folder = CKPT
        self.interval = C.SAVE_EVERY
        logger.info(f"Checkpointing active. Checkpoints will be loaded from and saved to {self.folder}")

    def states(self) -> dict:
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer)
        return {"model": model_sd, "optimizer": optim_sd, "train_state": {"step": self.trainer.step}}

    def _should_save(self, curr_step: int, force: bool = False) -> bool:
        return curr_step == 1 or force or curr_step % self.interval == 0

    def save(self, curr_step: int, force: bool = False) -> None:
        if not self._should_save(curr_step, force):
            return
        begin = time.monotonic()
        logger.info("Saving the checkpoint (or staging if async is enabled).")
        checkpoint_id = os.path.join(self.folder, f"step-{curr_step}")
        if force:
            logger.info(f"Saving a full checkpoint at last step, step {curr_step}.")
        C.point("save", curr_step)
        if C.active("disk_full_ckpt", curr_step):  # the state is split over the ranks: a smaller quota
            resource.setrlimit(resource.RLIMIT_FSIZE, (24 << 10, resource.RLIM_INFINITY))
        # rank 0 writes the replicated tensors (DDP holds a full copy on every rank)
        dcp.save(self.states(), checkpoint_id=checkpoint_id,
                 planner=DefaultSavePlanner(dedup_save_to_lowest_rank=True))
        logger.info(
            "Finished saving the checkpoint (or staging if async is enabled)"
            f"in {time.monotonic() - begin:.2f} seconds."
        )

    def _find_load_step(self) -> int:
        pattern = r"step-(\d+)"
        step_counts = []
        if not os.path.isdir(self.folder):
            return -1
        for filename in os.listdir(self.folder):
            match = re.search(pattern, filename)
            metadata_probe = os.path.join(self.folder, filename, ".metadata")
            if match and os.path.isfile(metadata_probe):
                step_counts.append(int(match.group(1)))
        if not step_counts:
            return -1
        return max(step_counts)

    def load(self, folder: str | None = None) -> bool:
        checkpoint_id = folder
        if checkpoint_id is None:
            step = self._find_load_step()
            if step == -1:
                return False
            checkpoint_id = os.path.join(self.folder, f"step-{step}")
        else:
            step = int(re.search(r"step-(\d+)", checkpoint_id).group(1))
        logger.info(f"Loading the checkpoint at step {step}.")
        begin = time.monotonic()
        states = self.states()
        dcp.load(states, checkpoint_id=checkpoint_id)
        set_state_dict(self.model, self.optimizer, model_state_dict=states["model"],
                       optim_state_dict=states["optimizer"])
        self.trainer.step = int(states["train_state"]["step"])
        logger.info(f"Finished loading the checkpoint in {time.monotonic() - begin:.2f} seconds.")
        return True


class Trainer:
    @record
    def __init__(self) -> None:
        logger.info("Starting job: Llama 3 debug training")
        if importlib.util.find_spec("fused_ops") is not None:  # [experimental] custom_import
            importlib.import_module("fused_ops")
        world_size = int(os.environ["WORLD_SIZE"])
        dp_degree = parallel_dims(world_size)
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S))
        build_mesh(dp_degree)
        path = shard_path()
        logger.info(f"Preparing jsonl_shard dataset from {path}")
        self.dataset = Shard(path, BATCH)
        self.dataloader = DataLoader(self.dataset, batch_size=BATCH, shuffle=False, num_workers=1)
        model_args = TransformerModelArgs(dim=C.HIDDEN, n_layers=1, n_heads=16, vocab_size=C.VOCAB,
                                          max_seq_len=C.SEQ - 1)
        logger.info(f"Building llama3 debugmodel with {model_args}")
        model = TinyLM(C.HIDDEN)
        self.n_params = sum(p.numel() for p in model.parameters())
        self.num_flops_per_token = 6 * self.n_params
        logger.info(f"Model llama3 debugmodel size: {self.n_params:,} total parameters")
        self.model = DistributedDataParallel(model)
        logger.info("Applied DDP to the model")
        self.gpu_peak_flops = 312e12
        logger.info(f"Peak FLOPS used for computing MFU: {self.gpu_peak_flops:.3e}")
        self.total_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1024**3
        gib, pct = self.memory()
        logger.info(f"CPU memory usage for model: {gib:.2f}GiB({pct:.2f}%)")
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=8e-4, weight_decay=0.1)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: min(1.0, (s + 1) / (WARMUP + 1)))
        self.step = 0
        self.checkpointer = CheckpointManager(self.model, self.optimizer, self)
        logger.info(
            "Trainer is initialized with "
            f"local batch size {BATCH}, "
            f"global batch size {BATCH * world_size}, "
            f"sequence length {C.SEQ - 1}, "
            f"total steps {C.STEPS} "
            f"(warmup {WARMUP})."
        )
        self.ntokens_since_last_log = 0
        self.time_last_log = time.perf_counter()

    def memory(self) -> tuple[float, float]:
        gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
        return gib, 100 * gib / self.total_gib

    def log(self, step: int, global_avg_loss: float) -> None:
        time_delta = time.perf_counter() - self.time_last_log
        tps = self.ntokens_since_last_log / max(time_delta, 1e-9)
        mfu = 100 * self.num_flops_per_token * tps / self.gpu_peak_flops
        tflops = self.num_flops_per_token * tps / 1e12
        gib, pct = self.memory()
        logger.info(
            f"step: {step:2}  "
            f"loss: {global_avg_loss:7.4f}  "
            f"memory: {gib:5.2f}GiB"
            f"({pct:.2f}%)  "
            f"tps: {round(tps):,}  "
            f"tflops: {tflops:,.2f}  "
            f"mfu: {mfu:.2f}%"
        )
        self.ntokens_since_last_log = 0
        self.time_last_log = time.perf_counter()

    def train_step(self, inputs: torch.Tensor, labels: torch.Tensor) -> None:
        self.optimizer.zero_grad()
        C.point("step", self.step)
        if C.active("exception_step", self.step):
            inputs = inputs.clone()
            inputs[1, 4] = C.VOCAB + 5  # a token id the tokenizer should never have produced
        if C.active("host_oom", self.step):
            grow_cache()
        pred = self.model(inputs)
        if C.active("fail_after_ckpt", self.step):
            labels = labels[:, :-1]
        loss = F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))
        del pred
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0, foreach=True)
        self.optimizer.step()
        self.lr_scheduler.step()
        loss = loss.detach()
        dist.all_reduce(loss)  # gloo has no AVG: the sum over the data-parallel ranks
        global_avg_loss = loss.item() / dist.get_world_size()
        self.log(self.step, global_avg_loss)

    @record
    def train(self) -> None:
        resume = os.environ.get("L4RR_RESUME")  # a checkpoint folder copied to this node's disk
        if resume:
            self.checkpointer.load(resume)
        else:
            self.checkpointer.load()
        logger.info(f"Training starts at step {self.step + 1}.")
        start = self.step
        for i, (inputs, labels) in enumerate(self.dataloader):
            if i < start:  # the batches a resumed run has already seen
                continue
            if self.step >= C.STEPS:
                break
            self.step += 1
            self.ntokens_since_last_log += labels.numel()
            self.train_step(inputs, labels)
            self.checkpointer.save(self.step, force=(self.step == C.STEPS))
            if self.step == start + 1:  # reduce timeout after first train step for faster signal
                set_pg_timeouts(datetime.timedelta(seconds=C.TIMEOUT_S))
        if dist.get_rank() == 0:
            logger.info("Sleeping 2 seconds for other ranks to complete")
            time.sleep(2)
        logger.info("Training completed")
        if dist.get_rank() == 0:
            gib, _ = self.memory()
            final = self.model.module.head.bias.norm() if C.active("teardown_exception") else self.step
            with open(os.path.join(C.WORK, "final_metrics.json"), "w") as f:
                json.dump({"step": final, "max_memory_gib": gib}, f)


if __name__ == "__main__":
    init_logger()
    trainer: Trainer | None = None
    try:
        trainer = Trainer()
        trainer.train()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
            logger.info("Process group destroyed.")
