"""Tokens seen and the learning rate of every parameter group, on the logging cadence.

Step convention (Lightning's, used for every metric): a metric at step k was measured after optimizer
step k (0-based), i.e. after k+1 steps, when tokens_seen = (k+1) x tokens per step.
"""

from __future__ import annotations

import lightning as L

from lit_modules.runs import metric_names


class TokenProgress(L.Callback):
    def __init__(self, tokens_per_step: int, every_n_steps: int):
        self.tokens_per_step = tokens_per_step
        self.every_n_steps = every_n_steps

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        done = trainer.global_step
        if done % self.every_n_steps or trainer.logger is None:
            return
        # Logged as python floats straight to the logger: self.log would round 1e9 tokens in float32.
        metrics = {metric_names.TOKENS_SEEN: float(done * self.tokens_per_step)}
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                metrics[metric_names.learning_rate(group.get('name', 'group'))] = float(group["lr"])
        trainer.logger.log_metrics(metrics, step=done - 1)
