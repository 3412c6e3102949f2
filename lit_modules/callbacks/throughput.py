"""Tokens per second and, on a known GPU, model FLOPs utilization (MFU).

MFU uses the analytic FLOPs per token (see `lit_modules.model.counting`) against a peak table keyed by
device name. An unknown device or a precision without a table entry logs no MFU and says so once:
a guessed peak is worse than none.
"""

from __future__ import annotations

import time

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn

from lit_modules.callbacks.peak_flops import HALF_PRECISIONS, PEAK_TFLOPS_BF16, peak_flops  # noqa: F401 - re-exported
from lit_modules.runs import metric_names


class Throughput(L.Callback):
    def __init__(self, tokens_per_step: int, flops_per_token: float, every_n_steps: int, precision: str):
        self.tokens_per_step = tokens_per_step
        self.flops_per_token = flops_per_token
        self.every_n_steps = every_n_steps
        self.precision = precision
        self._t0: float | None = None
        self._step0 = 0
        self._peak: float | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module) -> None:
        if trainer.strategy.root_device.type == "cuda":
            name = torch.cuda.get_device_name(trainer.strategy.root_device)
            self._peak = peak_flops(name, self.precision)
            if self._peak is None:
                rank_zero_warn(f"No peak-FLOPs entry for '{name}' at precision {self.precision}; MFU is not logged.")
        self._restart(trainer)

    def _restart(self, trainer: L.Trainer) -> None:
        self._t0 = time.perf_counter()
        self._step0 = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        step = trainer.global_step
        if step % self.every_n_steps or step == self._step0 or self._t0 is None:
            return
        if trainer.strategy.root_device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - self._t0
        tokens_per_s = (step - self._step0) * self.tokens_per_step / elapsed
        metrics = {metric_names.TOKENS_PER_S: tokens_per_s, metric_names.STEP_TIME_S: elapsed / (step - self._step0)}
        if self._peak is not None:
            metrics[metric_names.MFU] = tokens_per_s * self.flops_per_token / (self._peak * trainer.world_size)
        if trainer.logger is not None:
            trainer.logger.log_metrics(metrics, step=step - 1)
        self._restart(trainer)

    def on_validation_end(self, trainer: L.Trainer, pl_module) -> None:
        # Validation time is not training throughput.
        if not trainer.sanity_checking:
            self._restart(trainer)
