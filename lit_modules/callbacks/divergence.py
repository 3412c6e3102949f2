"""Stop a run whose loss is not finite, or has blown up past a factor of where it started.

Reading a loss on the host waits for the device. On CPU that costs nothing and every step is checked as it
ends. On an accelerator a wait per step would stall the launch queue, so the step losses stay on the device
and are read together every `every_n_steps` steps (the logging cadence), at the end of training and before
any checkpoint is written (so no diverged state is ever saved); the error names the same step either way.
"""

from __future__ import annotations

import math

import lightning as L
import torch


class DivergenceError(RuntimeError):
    """The training loss diverged; the run is failed with this message as its reason."""


class DivergenceGuard(L.Callback):
    def __init__(self, factor: float = 0.0, every_n_steps: int = 1, deferred: bool | None = None):
        self.factor = factor
        self.every_n_steps = max(1, every_n_steps)
        self.deferred = deferred  # None: decided by the device (deferred off CPU)
        self._initial: float | None = None
        self._pending: list[tuple[int, torch.Tensor]] = []

    def on_train_start(self, trainer: L.Trainer, pl_module) -> None:
        if self.deferred is None:
            self.deferred = trainer.strategy.root_device.type != "cpu"

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        loss = (outputs["loss"] if isinstance(outputs, dict) else outputs).detach()
        if not self.deferred:
            self._judge(trainer.global_step, float(loss))
            return
        self._pending.append((trainer.global_step, loss))
        if trainer.global_step % self.every_n_steps == 0:
            self.check()

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module, checkpoint: dict) -> None:
        self.check()  # raising here aborts the save: a diverged state is never written

    def on_train_end(self, trainer: L.Trainer, pl_module) -> None:
        self.check()

    def check(self) -> None:
        """Read the pending losses (one wait for the device) and raise at the first diverged one."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        values = torch.stack([loss.float().reshape(()) for _, loss in pending]).tolist()
        for (step, _), value in zip(pending, values):
            self._judge(step, value)

    def _judge(self, step: int, value: float) -> None:
        if not math.isfinite(value):
            raise DivergenceError(f"The training loss became {value} at step {step}.")
        if self._initial is None:
            self._initial = value
        elif self.factor > 0 and value > self.factor * self._initial:
            raise DivergenceError(
                f"The training loss {value:.3g} exceeded {self.factor:g}x its initial value "
                f"{self._initial:.3g} at step {step}."
            )
