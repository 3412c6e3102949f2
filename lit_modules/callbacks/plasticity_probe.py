"""A fine-tune's plasticity: the target loss of the base weights before the first step and after the last.

Logged into the fine-tune run (keys in lit_modules.runs.tags): `finetune/target_loss_before`,
`finetune/target_loss_after`, `finetune/plasticity` (= before - after, nats/token) and
`finetune/base_pretrain_val_loss`, all measured the same way on the target's held-out split.
"""

from __future__ import annotations

import contextlib

import lightning as L
import torch
import torch.nn.functional as F

from lit_modules.runs import tags


@torch.no_grad()
def heldout_loss(model: torch.nn.Module, dataloader, device: torch.device, context=None) -> float:
    """Mean next-token cross-entropy (nats/token) over every target of the loader (-100 targets ignored)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for x, y in dataloader:
            with context() if context is not None else contextlib.nullcontext():
                logits = model(x.to(device))
            y = y.to(device)
            flat = logits.float().reshape(-1, logits.size(-1))
            total += F.cross_entropy(flat, y.reshape(-1), reduction="sum").item()
            count += int((y != -100).sum())
    finally:
        model.train(was_training)
    return total / max(count, 1)


class PlasticityProbe(L.Callback):
    """Target loss of the base weights before the first step; plasticity at the end of a complete run."""

    def __init__(self, base_val_loss: float, steps: int):
        self.base_val_loss, self.steps = base_val_loss, steps
        self.before: float | None = None
        self.after: float | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != 0:
            return  # a resumed fine-tune: "before" was measured at its first start
        context = getattr(trainer.precision_plugin, "forward_context", None)
        loader = trainer.datamodule.val_dataloader()
        self.before = heldout_loss(pl_module.model, loader, pl_module.device, context)
        self._log(trainer, {tags.TARGET_LOSS_BEFORE: self.before, tags.BASE_VAL_LOSS: self.base_val_loss}, step=0)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.before is None or trainer.global_step < self.steps:
            return  # paused: measured when the fine-tune completes
        # Measured exactly as "before" (token-weighted): with prompt-masked SFT batches, Lightning's
        # val/loss weights batches equally however many response tokens each holds.
        context = getattr(trainer.precision_plugin, "forward_context", None)
        self.after = heldout_loss(pl_module.model, trainer.datamodule.val_dataloader(), pl_module.device, context)
        metrics = {tags.TARGET_LOSS_AFTER: self.after, tags.PLASTICITY: self.before - self.after}
        self._log(trainer, metrics, step=trainer.global_step)

    @staticmethod
    def _log(trainer: L.Trainer, metrics: dict[str, float], step: int) -> None:
        finite = {k: v for k, v in metrics.items() if v == v}
        if trainer.logger is not None and finite:
            trainer.logger.log_metrics(finite, step=step)
