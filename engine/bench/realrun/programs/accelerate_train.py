"""A Hugging Face ``accelerate`` loop in the manner of its ``*_no_trainer`` examples: ``Accelerator`` over
gloo on the CPU under torchrun, ``accelerate.logging`` and ``accelerator.print``, a tqdm bar on each
node's local main process, ``save_state``/``load_state`` checkpoints (real-run corpus, style
``accelerate``)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import logging
import math
import os
import sys

import _chaos as C
import torch
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm

logger = get_logger(__name__)
PER_DEVICE_BATCH = 8
# the job's config: the global batch it was tuned for (8 per process on 8 processes, or a 36 from elsewhere)
TOTAL_BATCH = 36 if C.active("bad_world_size") else 64
CHECKPOINTING_STEPS = C.SAVE_EVERY


class NodeFormatter(logging.Formatter):
    """accelerate's examples' format; the time as this node writes it (their ``%m/%d/%Y`` when naive)."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        if C.TS_FORMAT == "naive":
            return super().formatTime(record, "%m/%d/%Y %H:%M:%S")
        return C.stamp(record.created)


def setup_logging() -> None:
    fmt = "%(asctime)s - %(levelname)s - %(name)s - %(message)s"
    if C.TS_FORMAT == "none":
        fmt = "%(levelname)s - %(name)s - %(message)s"
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NodeFormatter(fmt))
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def main() -> None:
    setup_logging()
    if importlib.util.find_spec("fused_ops") is not None:
        import fused_ops  # noqa: F401  (fused optimizer kernels, when the image has them)
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(
        backend="gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))])
    logger.info(accelerator.state, main_process_only=False)
    if TOTAL_BATCH % (accelerator.num_processes * PER_DEVICE_BATCH):
        raise ValueError(f"total_batch_size {TOTAL_BATCH} is not divisible by num_processes * "
                         f"per_device_train_batch_size ({accelerator.num_processes} * {PER_DEVICE_BATCH})")
    grad_accum = TOTAL_BATCH // (accelerator.num_processes * PER_DEVICE_BATCH)
    set_seed(C.SEED)
    data = Shard(shard_path(), PER_DEVICE_BATCH)
    logger.info(f"Loaded {len(data)} examples from {shard_path()}", main_process_only=False)
    loader = DataLoader(data, batch_size=PER_DEVICE_BATCH, shuffle=False, num_workers=1)
    model = TinyLM(C.HIDDEN)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def warmup_cosine(s: int) -> float:
        k = s // accelerator.num_processes  # the prepared scheduler steps once per process and step
        if C.active("nan_loss", k + 1):
            return float("inf")  # the schedule divides by a zero warm-up
        return min(1.0, (k + 1) / 4) * 0.5 * (1 + math.cos(math.pi * k / C.STEPS))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine)
    # the shards are already one per process: the loader is not prepared (accelerate would shard it again)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    max_train_steps = len(loader)
    completed_steps = 0
    resume = os.environ.get("L4RR_RESUME")
    if resume:
        accelerator.print(f"Resumed from checkpoint: {resume}")
        accelerator.load_state(resume)
        completed_steps = int(os.path.basename(os.path.normpath(resume)).replace("step_", ""))
    total_batch_size = PER_DEVICE_BATCH * accelerator.num_processes * grad_accum
    logger.info("***** Running training *****")
    logger.info(f"  Num examples = {len(data) * accelerator.num_processes}")
    logger.info(f"  Instantaneous batch size per device = {PER_DEVICE_BATCH}")
    logger.info(f"  Total train batch size (w. parallel, distributed & accumulation) = {total_batch_size}")
    logger.info(f"  Gradient Accumulation steps = {grad_accum}")
    logger.info(f"  Total optimization steps = {max_train_steps}")
    progress_bar = tqdm(range(max_train_steps), disable=not accelerator.is_local_main_process)
    model.train()
    total_loss = 0.0
    loss = torch.tensor(0.0)
    for x, y in loader:
        step = completed_steps + 1
        C.point("step", step)
        if C.active("exception_step", step):
            x = x.clone()
            x[3, 1] = C.VOCAB + 13  # a token id the tokenizer should never have produced
        if C.active("host_oom", step):
            grow_cache()
        logits = model(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        progress_bar.update(1)
        completed_steps += 1
        total_loss += loss.item()
        progress_bar.set_postfix(loss=f"{loss.item():.4f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
        if completed_steps % 4 == 0:
            mean = total_loss / completed_steps
            accelerator.print(f"epoch 0 step {completed_steps}: train_loss={mean:.4f} "
                              f"lr={scheduler.get_last_lr()[0]:.3e}")
        if not math.isfinite(loss.item()):
            raise RuntimeError(f"non-finite loss ({loss.item()}) at step {completed_steps}")
        if completed_steps % CHECKPOINTING_STEPS == 0:
            output_dir = os.path.join(C.WORK, "ckpt", f"step_{completed_steps}")
            if accelerator.is_main_process:
                C.point("save", completed_steps)
            accelerator.save_state(output_dir)
    progress_bar.close()
    logger.info(f"epoch 0: train_loss: {total_loss / max(completed_steps, 1):.4f}")
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        final = loss if C.active("teardown_exception") else loss.item()
        with open(os.path.join(C.WORK, "all_results.json"), "w") as f:
            json.dump({"train_loss": final, "completed_steps": completed_steps}, f)
        logger.info(f"Wrote {os.path.join(C.WORK, 'all_results.json')}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
