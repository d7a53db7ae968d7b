"""A Hugging Face ``Trainer`` run of a tiny GPT-2 built from a config, no downloads (real-run corpus,
style ``hf``)."""

from __future__ import annotations

import importlib.util
import json
import math
import os

import _chaos as C
import torch
import torch.distributed as dist
from _tiny import Shard, grow_cache, shard_path
from torch.utils.data import SequentialSampler
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments
from transformers.utils import logging as hf_logging

MICRO = 8
log = hf_logging.get_logger("run_clm")


class LMShard(torch.utils.data.Dataset):
    def __init__(self, shard: Shard) -> None:
        self.shard = shard

    def __len__(self) -> int:
        return len(self.shard)

    def __getitem__(self, i: int) -> dict:
        x, y = self.shard[i]
        ids = torch.cat([x, y[-1:]])
        return {"input_ids": ids, "labels": ids.clone()}


class NanGuard(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
        loss = (logs or {}).get("loss")
        if loss is not None and math.isnan(float(loss)):
            raise ValueError(f"loss is nan at step {state.global_step}, stopping the run")


class ShardTrainer(Trainer):
    """Each rank trains on its own shard in order (the shards are already split per rank)."""

    def _get_train_sampler(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return SequentialSampler(self.train_dataset)

    def training_step(self, model, inputs, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        step = self.state.global_step + 1
        C.point("step", step)
        if C.active("exception_step", step):
            inputs["input_ids"][2, 4] = C.VOCAB + 5
        if C.active("host_oom", step):
            grow_cache()
        if C.active("fail_after_ckpt", step):
            inputs["labels"] = inputs["labels"][:, :-1]
        if C.active("nan_loss", step):
            self.lr_scheduler.base_lrs = [float("inf")] * len(self.lr_scheduler.base_lrs)
        return super().training_step(model, inputs, *args, **kwargs)

    def _save_checkpoint(self, model, trial):  # noqa: ANN001
        C.point("save", self.state.global_step)
        return super()._save_checkpoint(model, trial)


def main() -> None:
    hf_logging.set_verbosity_info()
    hf_logging.enable_explicit_format()
    if importlib.util.find_spec("fused_ops") is not None:
        import fused_ops  # noqa: F401
    args = TrainingArguments(
        output_dir=os.path.join(C.WORK, "ckpt"), max_steps=C.STEPS, per_device_train_batch_size=MICRO,
        learning_rate=3e-3, warmup_steps=3, logging_steps=1, save_strategy="steps", save_steps=C.SAVE_EVERY,
        use_cpu=True, ddp_backend="gloo", ddp_timeout=int(C.TIMEOUT_S), dataloader_num_workers=1,
        report_to="none", seed=C.SEED, disable_tqdm=False, save_total_limit=2,
        logging_nan_inf_filter=False)
    log.info(f"Process rank: {args.process_index}, device: {args.device}, n_gpu: {args.n_gpu}, "
             f"distributed training: {args.parallel_mode.value == 'distributed'}")
    data = LMShard(Shard(shard_path(), MICRO))
    log.info(f"loaded {len(data)} training samples from {shard_path()}")
    config = GPT2Config(vocab_size=C.VOCAB, n_positions=32, n_embd=C.HIDDEN, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    n_params = sum(p.numel() for p in model.parameters())
    log.info(f"Training new model from scratch - Total size={n_params} params")
    trainer = ShardTrainer(model=model, args=args, train_dataset=data, callbacks=[NanGuard()])
    result = trainer.train()
    trainer.log_metrics("train", result.metrics)
    if args.process_index == 0:
        loss = torch.tensor(result.training_loss) if C.active("teardown_exception") else result.training_loss
        with open(os.path.join(C.WORK, "all_results.json"), "w") as f:
            json.dump({"train_loss": loss, "train_steps": result.global_step}, f)
    dist.barrier()


if __name__ == "__main__":
    main()
