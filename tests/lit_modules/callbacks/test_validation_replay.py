"""A run killed during a validation resumes from the checkpoint written just before it (end of that training
step): the validation Lightning would skip is done once on resume, so the run's history equals an
uninterrupted run's: the same points, the same values, none twice. The replay runs Lightning's own validation
loop object (`trainer.fit_loop.epoch_loop.val_loop`), which Lightning 2.x does not document: this test is what
says when an upgrade breaks it."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest

from lit_modules.config.composition import compose_run_config
from lit_modules.train import run
from tests.helpers.runs import all_runs, metric_history, mlflow_client, tiny_overrides

KEYS = ("val/loss", "val/bits_per_byte", "train/loss")


class KillDuringValidation(L.Callback):
    """Ctrl-C in the middle of the validation after optimizer step `step` (its checkpoint is written)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0) -> None:
        if trainer.global_step == self.step and batch_idx == 1:
            raise KeyboardInterrupt


def test_a_run_killed_during_validation_logs_that_validation_when_resumed(runs_dir: Path) -> None:
    common = tiny_overrides(runs_dir, steps=20, **{"trainer.checkpoint_every_n_steps": "10"})
    whole = run(compose_run_config(common))
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        run(compose_run_config(common), extra_callbacks=[KillDuringValidation(10)])
    (killed,) = [r for r in all_runs(runs_dir) if r.info.run_id != whole.run_id]
    client = mlflow_client(runs_dir)
    assert killed.info.status == "KILLED"
    assert metric_history(client, killed.info.run_id, "val/loss") == []  # killed before its first point

    resumed = run(compose_run_config([*common, f"resume={killed.info.run_id}"]))
    assert resumed.run_id == killed.info.run_id and resumed.status == "FINISHED"
    for key in KEYS:
        expected = metric_history(client, whole.run_id, key)
        assert metric_history(client, resumed.run_id, key) == expected, key
    assert [step for step, _ in metric_history(client, whole.run_id, "val/loss")] == [9, 19]
