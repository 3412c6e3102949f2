"""Report each validation loss to Optuna and stop the run when the pruner says so."""

from __future__ import annotations

import lightning as L
import optuna

from lit_modules.tracking.run_lifecycle import RunStopped


class TrialPruned(RunStopped, optuna.TrialPruned):
    """Ends the MLflow run KILLED with reason 'pruned', and the Optuna trial PRUNED."""


class OptunaPruning(L.Callback):
    def __init__(self, trial: optuna.Trial, metric: str = "val/loss"):
        self.trial = trial
        self.metric = metric

    def on_validation_end(self, trainer: L.Trainer, pl_module) -> None:
        if trainer.sanity_checking or self.metric not in trainer.callback_metrics:
            return
        step = trainer.global_step
        self.trial.report(float(trainer.callback_metrics[self.metric]), step)
        if self.trial.should_prune():
            raise TrialPruned(f"pruned at step {step}")
