"""The LightningModule: next-token loss, logging, and the optimizer the builder hands it.

It knows nothing of any technique: techniques reach a run through model transforms, parameter-group
editors, callbacks and loss terms, all assembled in `build.py`. A loss term (name -> scalar, from this
step's logits and batch) is added to the training objective and logged as `train/<name>`; `train/loss` and
`val/loss` stay the plain next-token loss, comparable between runs with and without a term.

A training step is Lightning's automatic optimization: `training_step` returns what the optimizer minimizes,
and Lightning does the rest in this order: zero the gradients, backward, `on_before_optimizer_step` (the
callbacks', then this module's grad norm), clip (`configure_gradient_clipping`), step the optimizer, step
the scheduler (`configure_optimizers`, interval "step"). Clipping and gradient accumulation are the
Trainer's `gradient_clip_val` and `accumulate_grad_batches` (`build.optimizer_step_flags`).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from lit_modules.distributed.fsdp_clip import clip_sharded_grad_norm

OptimizerFactory = Callable[[nn.Module], torch.optim.Optimizer]
ScheduleFactory = Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler]
Batch = tuple[torch.Tensor, torch.Tensor]
LossTerms = Callable[[torch.Tensor, Batch], dict[str, torch.Tensor]]  # (logits, batch) -> name -> scalar


class CausalLMModule(L.LightningModule):
    def __init__(
        self,
        model: nn.Module,
        optimizer_factory: OptimizerFactory,
        schedule_factory: ScheduleFactory,
        grad_norm_every: int = 10,
        bytes_per_token: float | None = None,
        loss_terms: Sequence[LossTerms] = (),
    ):
        super().__init__()
        self.model = model
        self._optimizer_factory = optimizer_factory
        self._schedule_factory = schedule_factory
        self._grad_norm_every = grad_norm_every
        self._loss_terms = list(loss_terms)
        # bits per byte compares runs with different tokenizers; nats per token does not.
        self._bpb_factor = 1.0 / (math.log(2) * bytes_per_token) if bytes_per_token else None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.model(idx)

    @staticmethod
    def _next_token_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))

    def _loss(self, batch: Batch) -> torch.Tensor:
        x, y = batch
        return self._next_token_loss(self.model(x), y)

    def training_objective(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(what the optimizer minimizes, the next-token loss, the techniques' and the model's loss terms).

        A model may report auxiliary losses of its last forward through `aux_losses()` (name -> scalar, e.g.
        a mixture of experts' load-balancing loss); they are added and logged like the techniques' terms."""
        aux_losses = getattr(self.model, "aux_losses", None)
        if not self._loss_terms and aux_losses is None:
            loss = self._loss(batch)
            return loss, loss, {}
        x, y = batch
        logits = self.model(x)
        loss = self._next_token_loss(logits, y)
        terms: dict[str, torch.Tensor] = dict(aux_losses()) if aux_losses is not None else {}
        for loss_terms in self._loss_terms:
            terms.update(loss_terms(logits, batch))
        if not terms:
            return loss, loss, {}
        return loss + sum(terms.values()), loss, terms

    def training_step(self, batch: Batch, batch_idx: int) -> torch.Tensor:
        objective, loss, terms = self.training_objective(batch)
        # Only on the steps the logger writes: self.log costs a little on every call, which shows on small models.
        if (self.trainer.global_step + 1) % self.trainer.log_every_n_steps == 0:
            # Averaged over ranks: under DDP the logged loss is the global batch's, as one process would see it.
            # Not prog_bar: Lightning turns progress-bar values into Python numbers after every batch, which on
            # a GPU would wait for the device on every step, not only on this one (test_step_host_reads.py).
            self.log("train/loss", loss, on_step=True, on_epoch=False, sync_dist=True)
            for name, value in terms.items():
                self.log(f"train/{name}", value.detach(), on_step=True, on_epoch=False, sync_dist=True)
        return objective

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        loss = self._loss(batch)
        self.log("val/loss", loss, on_step=False, on_epoch=True, sync_dist=True, prog_bar=True)
        if self._bpb_factor is not None:
            self.log("val/bits_per_byte", loss * self._bpb_factor, on_step=False, on_epoch=True, sync_dist=True)

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # Before clipping, so the logged norm shows what clipping had to deal with; on the steps the logger writes
        # (as train/loss), or Lightning would write this step's norm under a later step's number.
        if (self.trainer.global_step + 1) % self._grad_norm_every == 0:
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            if grads:
                norm = torch.nn.utils.get_total_norm(grads, norm_type=2.0)
                self.log("train/grad_norm", norm, on_step=True, on_epoch=False)

    def configure_gradient_clipping(self, optimizer: torch.optim.Optimizer, gradient_clip_val: float | None = None,
                                    gradient_clip_algorithm: str | None = None) -> None:
        # Under FSDP the norm is the whole model's, which only the root FSDP module computes (distributed/
        # fsdp_clip.py); Lightning's FSDP precision refuses norm clipping. Every other strategy: Lightning's clip.
        norm = gradient_clip_algorithm in (None, "norm")
        if gradient_clip_val and norm and clip_sharded_grad_norm(self.trainer.strategy.model, gradient_clip_val):
            return
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def configure_optimizers(self):
        optimizer = self._optimizer_factory(self.model)
        scheduler = self._schedule_factory(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}
