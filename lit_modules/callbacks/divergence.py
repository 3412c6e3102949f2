"""Stop a run whose loss is not finite, or has blown up past a factor of where it started."""

from __future__ import annotations

import math

import lightning as L


class DivergenceError(RuntimeError):
    """The training loss diverged; the run is failed with this message as its reason."""


class DivergenceGuard(L.Callback):
    def __init__(self, factor: float = 0.0):
        self.factor = factor
        self._initial: float | None = None

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        value = float(loss.detach())
        if not math.isfinite(value):
            raise DivergenceError(f"The training loss became {value} at step {trainer.global_step}.")
        if self._initial is None:
            self._initial = value
        elif self.factor > 0 and value > self.factor * self._initial:
            raise DivergenceError(
                f"The training loss {value:.3g} exceeded {self.factor:g}x its initial value "
                f"{self._initial:.3g} at step {trainer.global_step}."
            )
