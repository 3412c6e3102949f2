"""Log the configured diagnostics at the start, every N optimizer steps, and at the end of training."""

from __future__ import annotations

import tempfile
from pathlib import Path

import lightning as L
import torch

from lit_modules.diagnostics import REGISTRY, DiagnosticContext


class DiagnosticsLogger(L.Callback):
    def __init__(self, names: list[str], every_n_steps: int, batch_size: int = 4):
        unknown = [n for n in names if n not in REGISTRY]
        if unknown:
            raise ValueError(f"Unknown diagnostic(s): {', '.join(unknown)}.")
        self.names = list(names)
        self.every_n_steps = every_n_steps
        self.batch_size = batch_size
        self._tokens: torch.Tensor | None = None
        self._last_step = -1

    def _batch(self, trainer: L.Trainer, device: torch.device) -> torch.Tensor:
        if self._tokens is None:
            dataset = trainer.datamodule.val_dataset()
            count = min(self.batch_size, len(dataset))
            self._tokens = torch.stack([dataset[i][0] for i in range(count)])
        return self._tokens.to(device)

    def run(self, trainer: L.Trainer, pl_module: L.LightningModule, step: int) -> None:
        if not trainer.is_global_zero or step == self._last_step or not self.names:
            return
        self._last_step = step
        was_training = pl_module.training
        pl_module.eval()
        try:
            with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
                ctx = DiagnosticContext(pl_module.model, self._batch(trainer, pl_module.device), step, Path(tmp))
                metrics: dict[str, float] = {}
                for name in self.names:
                    result = REGISTRY[name](ctx)
                    metrics.update({f"diag/{k}": float(v) for k, v in result.metrics.items()})
                    for path in result.artifacts:
                        log_artifact = getattr(trainer.logger, "log_artifact", None)
                        if log_artifact is not None:
                            log_artifact(path, f"diagnostics/step_{step:07d}")
                if trainer.logger is not None and metrics:
                    trainer.logger.log_metrics(metrics, step=max(step - 1, 0))
        finally:
            pl_module.train(was_training)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.run(trainer, pl_module, trainer.global_step)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        step = trainer.global_step
        if self.every_n_steps > 0 and step % self.every_n_steps == 0:
            self.run(trainer, pl_module, step)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.run(trainer, pl_module, trainer.global_step)
