"""A PyTorch Lightning ``Trainer`` run: DDP over gloo under torchrun, Lightning's own progress bar,
checkpoint callback and rank-zero messages, a user logger beside them (real-run corpus, style
``lightning``)."""

from __future__ import annotations

import datetime
import importlib.util
import json
import math
import os

import _chaos as C
import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from _tiny import Shard, TinyLM, grow_cache, shard_path
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader

log = C.logger("train_lm", f"%(asctime)s [%(levelname)s] rank={C.RANK} %(name)s - %(message)s")
MICRO = 8
TP = 3 if C.active("bad_world_size") else 1


class LitLM(pl.LightningModule):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.model = TinyLM(hidden)

    def setup(self, stage: str) -> None:
        world = self.trainer.world_size
        log.info("setup(%s): world_size=%d global_rank=%d", stage, world, self.trainer.global_rank)
        if world % TP:
            raise ValueError(f"world size {world} is not divisible by tensor_parallel_size {TP}")

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        step = self.global_step + 1
        C.point("step", step)
        x, y = batch
        if C.active("exception_step", step):
            x = x.clone()
            x[0, 2] = C.VOCAB + 9
        if C.active("host_oom", step):
            grow_cache()
        logits = self.model(x)
        if C.active("fail_after_ckpt", step):
            y = y[:, :-1]
        loss = F.cross_entropy(logits.reshape(-1, C.VOCAB), y.reshape(-1))
        self.log("train_loss", loss, prog_bar=True, on_step=True)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"loss is {loss.item()} at step {step}, stopping")
        return loss

    def configure_optimizers(self) -> dict:
        opt = torch.optim.AdamW(self.parameters(), lr=3e-3, weight_decay=0.01)

        def factor(s: int) -> float:
            if C.active("nan_loss", s + 1):
                return float("inf")  # the schedule divides by a zero warm-up
            return min(1.0, (s + 1) / 5)

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class PeriodicCheckpoint(ModelCheckpoint):
    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        C.point("save", trainer.global_step)
        if trainer.global_rank == 0:
            log.info("saving checkpoint %s", filepath)
        super()._save_checkpoint(trainer, filepath)


def main() -> None:
    log.info("starting on %s pid=%d lightning=%s", C.NODE, os.getpid(), pl.__version__)
    if importlib.util.find_spec("fused_ops") is not None:
        import fused_ops  # noqa: F401  (fused optimizer kernels, when the image has them)
    data = Shard(shard_path(), MICRO)
    log.info("loaded %d samples from %s", len(data), shard_path())
    loader = DataLoader(data, batch_size=MICRO, shuffle=False, num_workers=1)
    ckpt = PeriodicCheckpoint(dirpath=os.path.join(C.WORK, "ckpt"), filename="step-{step:05d}",
                              every_n_train_steps=C.SAVE_EVERY, save_top_k=-1)
    trainer = pl.Trainer(
        accelerator="cpu", devices=int(os.environ.get("LOCAL_WORLD_SIZE", "2")),
        num_nodes=C.WORLD // int(os.environ.get("LOCAL_WORLD_SIZE", "2")),
        strategy=DDPStrategy(process_group_backend="gloo", timeout=datetime.timedelta(seconds=C.TIMEOUT_S)),
        max_steps=C.STEPS, max_epochs=1, log_every_n_steps=1, logger=False, callbacks=[ckpt],
        use_distributed_sampler=False, num_sanity_val_steps=0, enable_model_summary=True)
    model = LitLM(C.HIDDEN)
    trainer.fit(model, train_dataloaders=loader)
    final = trainer.callback_metrics.get("train_loss", torch.tensor(0.0))
    if trainer.global_rank == 0:
        with open(os.path.join(C.WORK, "metrics.json"), "w") as f:
            json.dump({"train_loss": final if C.active("teardown_exception") else float(final),
                       "steps": trainer.global_step}, f)
        log.info("wrote %s", os.path.join(C.WORK, "metrics.json"))
    log.info("done")


if __name__ == "__main__":
    main()
