"""WISCA's training hook: the periodic transition every N optimizer steps, with its optimizer-state policy."""

from __future__ import annotations

from typing import Protocol

import lightning as L
import torch
from torch import nn

from lit_modules.techniques.wisca.opt_state import apply_opt_state_policy
from lit_modules.techniques.wisca.rescales import Rescale
from lit_modules.techniques.wisca.settings import WiscaSettings


class WiscaSchedule(Protocol):
    """What the hook reads from the technique (`technique.Wisca` is one): when to transition and how."""

    settings: WiscaSettings  # at_init, every_n_steps, opt_state
    init_metrics: dict[str, float]

    def transition(self, model: nn.Module) -> tuple[list[Rescale], dict[str, float]]: ...


class WiscaTransitions(L.Callback):
    """Applies WISCA every N optimizer steps and logs `wisca/transitions` and per-layer ratios/scales."""

    def __init__(self, technique: WiscaSchedule):
        self.technique = technique
        self.transitions = 0
        self.last_step = 0  # global step of the last periodic transition (saved in checkpoints)

    def state_dict(self) -> dict[str, int]:
        return {"transitions": self.transitions, "last_step": self.last_step}

    def load_state_dict(self, state_dict: dict[str, int]) -> None:
        self.transitions = int(state_dict["transitions"])
        self.last_step = int(state_dict["last_step"])

    def _log(self, trainer: L.Trainer, metrics: dict[str, float], step: int) -> None:
        if trainer.logger is not None:
            trainer.logger.log_metrics({**metrics, "wisca/transitions": float(self.transitions)}, step=step)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # A fresh run reports the at-init transition; a resumed one restored its count from the checkpoint.
        if trainer.global_step == 0 and self.technique.settings.at_init:
            self.transitions = 1
            self._log(trainer, self.technique.init_metrics, step=0)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        n, step = self.technique.settings.every_n_steps, trainer.global_step
        # With gradient accumulation this hook runs per micro-batch; only the first one at a step counts.
        if n <= 0 or step == 0 or step % n != 0 or step == self.last_step:
            return
        self.last_step = step
        model = getattr(pl_module, "model", pl_module)
        with torch.no_grad():
            rescales, metrics = self.technique.transition(model)
            for optimizer in trainer.optimizers:
                apply_opt_state_policy(optimizer, rescales, self.technique.settings.opt_state)
        self.transitions += 1
        self._log(trainer, metrics, step=step - 1)
