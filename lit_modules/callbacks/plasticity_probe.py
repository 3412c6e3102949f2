"""A fine-tune's plasticity: the target loss of the base weights before the first step and after the last.

Logged into the fine-tune run (keys in lit_modules.runs.tags): `finetune/target_loss_before`,
`finetune/target_loss_after`, `finetune/plasticity` (= before - after, nats/token),
`finetune/base_pretrain_val_loss`, and the top-1 next-token accuracy before and after
(`finetune/target_acc_before`, `finetune/target_acc_after`) with its floor, the most frequent target token's
share (`finetune/target_acc_majority`), all measured the same way on the target's held-out split.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import lightning as L
import torch
import torch.nn.functional as F

from lit_modules.runs import tags


@dataclass(frozen=True)
class HeldoutScore:
    """One pass over the target's held-out split: loss (nats/token), top-1 accuracy and its floor."""

    loss: float
    acc: float
    majority_acc: float  # the most frequent target token's share: a constant predictor's accuracy
    tokens: int


@torch.no_grad()
def heldout_score(model: torch.nn.Module, dataloader, device: torch.device, context=None) -> HeldoutScore:
    """Next-token cross-entropy and top-1 accuracy over every target of the loader (-100 targets ignored),
    both token-weighted."""
    was_training = model.training
    model.eval()
    total, correct, count, counts = 0.0, 0, 0, None
    try:
        for x, y in dataloader:
            with context() if context is not None else contextlib.nullcontext():
                logits = model(x.to(device))
            y = y.to(device).reshape(-1)
            flat = logits.float().reshape(-1, logits.size(-1))
            total += F.cross_entropy(flat, y, reduction="sum").item()
            kept = y != -100
            correct += int((flat.argmax(-1)[kept] == y[kept]).sum())
            count += int(kept.sum())
            seen = torch.bincount(y[kept].cpu(), minlength=flat.size(-1))
            counts = seen if counts is None else counts + seen
    finally:
        model.train(was_training)
    majority = int(counts.max()) if counts is not None else 0
    return HeldoutScore(total / max(count, 1), correct / max(count, 1), majority / max(count, 1), count)


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
        score = heldout_score(pl_module.model, loader, pl_module.device, context)
        self.before = score.loss
        self._log(trainer, {tags.TARGET_LOSS_BEFORE: score.loss, tags.TARGET_ACC_BEFORE: score.acc,
                            tags.TARGET_ACC_FLOOR: score.majority_acc, tags.BASE_VAL_LOSS: self.base_val_loss}, step=0)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.before is None or trainer.global_step < self.steps:
            return  # paused: measured when the fine-tune completes
        # Measured exactly as "before" (token-weighted): with prompt-masked SFT batches, Lightning's
        # val/loss weights batches equally however many response tokens each holds.
        context = getattr(trainer.precision_plugin, "forward_context", None)
        score = heldout_score(pl_module.model, trainer.datamodule.val_dataloader(), pl_module.device, context)
        self.after = score.loss
        metrics = {tags.TARGET_LOSS_AFTER: score.loss, tags.TARGET_ACC_AFTER: score.acc,
                   tags.PLASTICITY: self.before - self.after}
        self._log(trainer, metrics, step=trainer.global_step)

    @staticmethod
    def _log(trainer: L.Trainer, metrics: dict[str, float], step: int) -> None:
        finite = {k: v for k, v in metrics.items() if v == v}
        if trainer.logger is not None and finite:
            trainer.logger.log_metrics(finite, step=step)
