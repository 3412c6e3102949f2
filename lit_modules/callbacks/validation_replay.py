"""On resume, redo the validation that was due right after the restored checkpoint but never logged.

`last.ckpt` is written at the end of a training step, before that step's validation runs. A run killed
during that validation resumes from the checkpoint, and Lightning, which assumes a checkpoint taken at the
end of a batch was followed by its validation, skips it: that point would be missing for good. This
callback asks the run's logger whether the point is in the history and, if not, validates once before
training continues, so the history equals an uninterrupted run's. It must come after every callback that
prepares the model in `on_train_start` (e.g. the PC layer's refresh), so it validates the same model.
"""

from __future__ import annotations

import lightning as L

VALIDATION_KEY = "val/loss"


class ValidationReplay(L.Callback):
    def __init__(self, val_every_n_steps: int, key: str = VALIDATION_KEY):
        self.val_every_n_steps = val_every_n_steps
        self.key = key

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        step = trainer.global_step
        if step == 0 or step % self.val_every_n_steps or not trainer.enable_validation:
            return
        missing = False
        if trainer.is_global_zero:
            logged = getattr(trainer.logger, "has_metric_at", None)
            # A metric of optimizer step k is logged at step k - 1 (see README, "Where results appear").
            missing = logged is not None and not logged(self.key, step - 1)
        if trainer.strategy.broadcast(missing, src=0):  # every rank validates, or none does
            self._validate(trainer)

    @staticmethod
    def _validate(trainer: L.Trainer) -> None:
        # What the training epoch loop does around its own validation (Lightning 2.x loops).
        val_loop = trainer.fit_loop.epoch_loop.val_loop
        val_loop.restarting = False  # run a whole validation, not the restored tail of the last one
        trainer.validating = True
        val_loop.run()
        trainer.training = True
