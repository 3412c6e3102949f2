"""Periodic and final `last.ckpt`, written atomically with its checksum, plus an optional pause point.

Pausing (`stop_after_steps`) stops after that optimizer step without touching the schedule, so a run can
be finished later by `resume=`; the exact-resume test relies on this. A pause validates only where the
schedule validates, so a paused and resumed run logs the same validation points as an uninterrupted one.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L

from lit_modules.verified_checkpoint import commit_checkpoint


class LastCheckpoint(L.Callback):
    def __init__(
        self,
        dirpath: str | Path,
        every_n_steps: int,
        stop_after_steps: int | None = None,
        final_step: int | None = None,
        val_every_n_steps: int | None = None,
    ):
        self.dirpath = Path(dirpath)
        self.every_n_steps = every_n_steps
        self.val_every_n_steps = val_every_n_steps
        self.stop_after_steps = stop_after_steps
        self.final_step = final_step
        self.paused = False

    @property
    def path(self) -> Path:
        return self.dirpath / "last.ckpt"

    def save(self, trainer: L.Trainer) -> None:
        tmp = self.dirpath / "last.ckpt.tmp"
        if trainer.logger is not None:
            trainer.logger.save()  # metrics held by the logger reach the store before the state they belong to
        # Full state (optimizer, loops, callbacks): resume needs all of it. Every rank must call this; the
        # strategy writes on rank 0.
        trainer.save_checkpoint(tmp, weights_only=False)
        trainer.strategy.barrier("last-checkpoint")
        if trainer.is_global_zero:
            commit_checkpoint(tmp, self.path)
        trainer.strategy.barrier("last-checkpoint-done")

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        step = trainer.global_step
        if self.stop_after_steps is not None and step >= self.stop_after_steps and not trainer.should_stop:
            # Saved here, not in on_train_end: Lightning's loop counters are only consistent mid-batch,
            # and a checkpoint taken after the loop ends resumes with metric steps shifted by one.
            self.save(trainer)
            self.paused = True
            trainer.should_stop = True  # Lightning validates whenever it is asked to stop...
            if self.val_every_n_steps and step % self.val_every_n_steps:
                trainer.limit_val_batches = 0  # ...so off the schedule, turn that validation off
            return
        if self.final_step is not None and step >= self.final_step:
            trainer.should_stop = True  # makes Lightning validate once more at the very end
            return
        if step > 0 and step % self.every_n_steps == 0:
            self.save(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module) -> None:
        if not self.paused:  # the final weights, for evaluation and export
            self.save(trainer)
