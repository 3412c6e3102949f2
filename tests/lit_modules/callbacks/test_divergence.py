"""The divergence guard names the first diverged step whether it reads every loss as the step ends (CPU)
or reads them together later (accelerators), and never lets a diverged state be checkpointed."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from lit_modules.callbacks.divergence import DivergenceError, DivergenceGuard


class Scripted(L.LightningModule):
    """A one-weight model whose loss turns NaN from optimizer step `bad_step` on."""

    def __init__(self, bad_step: int):
        super().__init__()
        self.bad_step = bad_step
        self.w = nn.Parameter(torch.ones(1))
        self.steps_run = 0

    def training_step(self, batch, batch_idx):
        self.steps_run += 1
        (x,) = batch
        loss = (self.w * x).pow(2).mean() + 1.0
        return loss * float("nan") if self.global_step >= self.bad_step else loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(64, 1)), batch_size=4)


class SaveAt(L.Callback):
    """Writes a checkpoint at the end of one step, as LastCheckpoint does on its cadence."""

    def __init__(self, step: int, path: Path):
        self.step, self.path = step, path

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == self.step:
            trainer.save_checkpoint(self.path)


def _fit(guard: DivergenceGuard, bad_step: int, *extra: L.Callback) -> tuple[str, Scripted]:
    module = Scripted(bad_step)
    trainer = L.Trainer(max_steps=12, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[guard, *extra])
    with pytest.raises(DivergenceError) as raised:
        trainer.fit(module)
    return str(raised.value), module


def test_deferred_reading_names_the_same_step_as_reading_every_step():
    at_once, immediate = _fit(DivergenceGuard(), bad_step=3)
    later, deferred = _fit(DivergenceGuard(every_n_steps=5, deferred=True), bad_step=3)
    assert later == at_once == "The training loss became nan at step 4."
    assert immediate.steps_run == 4 and deferred.steps_run == 5  # read with step 5's losses


def test_deferred_losses_are_read_before_a_checkpoint_is_written(tmp_path):
    path = tmp_path / "last.ckpt"
    message, module = _fit(DivergenceGuard(every_n_steps=10, deferred=True), 2, SaveAt(4, path))
    assert message == "The training loss became nan at step 3." and module.steps_run == 4
    assert not path.exists()


def test_the_factor_is_judged_against_the_first_loss_in_both_modes():
    for guard in (DivergenceGuard(factor=1.5), DivergenceGuard(factor=1.5, every_n_steps=3, deferred=True)):
        guard._judge(1, 2.0)
        guard._judge(2, 2.9)
        with pytest.raises(DivergenceError, match="exceeded 1.5x its initial value 2 at step 3"):
            guard._judge(3, 3.1)
