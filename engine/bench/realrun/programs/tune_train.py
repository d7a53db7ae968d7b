"""A recipe in the wording of TorchTune's ``full_finetune_distributed`` (real-run corpus, style ``tune``):
``logging``'s default ``LEVEL:name:message`` format (``INFO:torchtune.utils._logging:...``, no time of its
own, only torchrun's), the resolved config dumped at start, the recipe's set-up messages (``Model is
initialized with precision torch.float32.``, ``Optimizer is initialized.``, ``Loss is initialized.``,
``Dataset and Sampler are initialized.``, ``Learning rate scheduler is initialized.``), a tqdm bar
``1|N|Loss: ...`` on rank 0 and the StdoutLogger's metrics ``Step N | loss:... lr:...
tokens_per_second_per_gpu:...`` every ``log_every_n_steps``, ``Saving checkpoint. This may take some time.
Retrieving full model state dict...`` / ``Model checkpoint of size 0.00 GiB saved to ...`` every save period.
The training is real: torch DDP over gloo with AdamW and a cosine schedule with warm-up."""

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
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

BATCH = 8
LOG_EVERY = 1 + C.SEED % 3  # log_every_n_steps
LR = 2e-3
WARMUP = 0 if C.active("nan_loss") else 3  # num_warmup_steps (0: the schedule divides by zero)
TP_DIM = 3 if C.active("bad_world_size") else 1  # tensor_parallel_dim of a config written for 6 GPUs
OUT = os.path.join(C.WORK, "ckpt")

logging.basicConfig(stream=sys.stderr, level=logging.DEBUG)  # torchtune's get_logger: the default format
log = logging.getLogger("torchtune.utils._logging")


def config() -> str:
    return f"""batch_size: {BATCH}
checkpointer:
  _component_: torchtune.training.FullModelTorchTuneCheckpointer
  checkpoint_dir: {os.environ.get("L4RR_RESUME", "/tmp/tinylm")}
  output_dir: {OUT}
  model_type: LLAMA3
  resume_from_checkpoint: {str(bool(os.environ.get("L4RR_RESUME"))).lower()}
clip_grad_norm: 1.0
dataset:
  _component_: torchtune.datasets.text_completion_dataset
  source: json
  data_files: {shard_path()}
device: cpu
dtype: fp32
epochs: 1
gradient_accumulation_steps: 1
log_every_n_steps: {LOG_EVERY}
loss:
  _component_: torchtune.modules.loss.CEWithChunkedOutputLoss
lr_scheduler:
  _component_: torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup
  num_warmup_steps: {WARMUP}
max_steps_per_epoch: {C.STEPS}
metric_logger:
  _component_: torchtune.training.metric_logging.StdoutLogger
model:
  _component_: tinylm.tinylm_64
  hidden_dim: {C.HIDDEN}
optimizer:
  _component_: torch.optim.AdamW
  lr: {LR}
  weight_decay: 0.01
save_every_n_steps: {C.SAVE_EVERY}
seed: {C.SEED}
tensor_parallel_dim: {TP_DIM}
"""


def lr_lambda(step: int) -> float:
    """get_cosine_schedule_with_warmup's factor."""
    if step < WARMUP or WARMUP == 0 and step == C.STEP and C.active("nan_loss"):
        return step / WARMUP if WARMUP else float("inf")
    progress = (step - WARMUP) / max(1, C.STEPS - WARMUP)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def save(model: torch.nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    if dist.get_rank() == 0:
        log.info("Saving checkpoint. This may take some time. Retrieving full model state dict...")
        t0 = time.perf_counter()
        sd = model.state_dict()
        log.info(f"Getting full model state dict took {time.perf_counter() - t0:.2f} secs")
        C.point("save", step)
        folder = os.path.join(OUT, f"step_{step}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "model-00001-of-00001.pt")
        torch.save({"model": sd, "optimizer": opt.state_dict(), "steps_run": step}, path)
        size = os.path.getsize(path) / 1024**3
        log.info(f"Model checkpoint of size {size:.2f} GiB saved to {path}")
        log.info(f"Saving checkpoint took {time.perf_counter() - t0:.2f} secs")
    dist.barrier()


@record
def recipe_main() -> None:
    if importlib.util.find_spec("fused_ops") is not None:  # the image's fused AdamW kernels
        import fused_ops  # noqa: F401
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S))
    world, rank = dist.get_world_size(), dist.get_rank()
    if rank == 0:
        log.info("Running FullFinetuneRecipeDistributed with resolved config:\n\n" + config())
    if world % TP_DIM:
        raise ValueError(f"world_size ({world}) must be divisible by tensor_parallel_dim ({TP_DIM})")
    log.debug(f"Setting manual seed to local seed {C.SEED + rank}. Local seed is seed + rank = "
              f"{C.SEED} + {rank}")
    torch.manual_seed(C.SEED)
    t0 = time.perf_counter()
    model = TinyLM(C.HIDDEN)
    start = 0
    resume = os.environ.get("L4RR_RESUME")
    state = torch.load(resume, weights_only=True) if resume else None
    if state is not None:
        model.load_state_dict(state["model"])
        start = int(state.get("steps_run", state.get("step", 0)))
    ddp = DistributedDataParallel(model)
    if rank == 0:
        log.info(f"Instantiating model and loading checkpoint took {time.perf_counter() - t0:.2f} secs")
        log.info("Model is initialized with precision torch.float32.")
    opt = torch.optim.AdamW(ddp.parameters(), lr=LR, weight_decay=0.01)
    if rank == 0:
        log.info("Optimizer is initialized.")
        log.info("Loss is initialized.")
    data = Shard(shard_path(), BATCH)
    loader = DataLoader(data, batch_size=BATCH, shuffle=False, num_workers=1)
    if rank == 0:
        log.info("Dataset and Sampler are initialized.")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda, last_epoch=-1)
    if rank == 0:
        log.info("Learning rate scheduler is initialized.")
        log.warning(" Profiling disabled.")
        log.info(" Profiler config after instantiation: {'enabled': False}")
    bar = tqdm(total=C.STEPS, initial=start, disable=rank != 0, file=sys.stderr)
    t_last, tokens = time.perf_counter(), 0
    loss = torch.tensor(0.0)
    for i, (x, y) in enumerate(loader):
        if i < start:
            continue
        step = i + 1
        C.point("step", step)
        if C.active("exception_step", step):
            x = x.clone()
            x[2, 0] = C.VOCAB + 5  # a token id the tokenizer should never have produced
        if C.active("host_oom", step):
            grow_cache()
        sched.last_epoch = step - 1
        for g in opt.param_groups:
            g["lr"] = LR * lr_lambda(step)
        logits = ddp(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        tokens += x.numel()
        value = loss.item()
        bar.update(1)
        bar.set_description(f"1|{step}|Loss: {value}")
        if step % LOG_EVERY == 0 and rank == 0:
            now = time.perf_counter()
            lr = opt.param_groups[0]["lr"]
            tqdm.write(f"Step {step} | loss:{value} lr:{lr} tokens_per_second_per_gpu:"
                       f"{tokens / (now - t_last):.4f} ", file=sys.stdout)
            sys.stdout.flush()
            t_last, tokens = now, 0
        if not math.isfinite(value):
            raise RuntimeError(f"Loss is not finite: {value} (step {step})")
        if step % C.SAVE_EVERY == 0:
            save(ddp.module, opt, step)
    bar.close()
    dist.barrier()
    if rank == 0:  # the run's summary, next to the checkpoints
        final = loss if C.active("teardown_exception") else loss.item()
        with open(os.path.join(C.WORK, "training_summary.json"), "w") as f:
            json.dump({"final_loss": final, "steps_run": C.STEPS, "world_size": world}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    recipe_main()
