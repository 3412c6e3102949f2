"""No host read of a tensor in a training step except on the steps the logger writes.

On a GPU, reading a tensor's value on the host (`.item()`, `float(t)`, `.tolist()`, `if t:`, `.cpu()`) waits
for every kernel queued before it, and the launch queue runs dry. The CPU has no such wait to observe, so
this counts the reads themselves: a real Lightning fit of the platform's module and per-step callbacks (the
divergence guard deferred, as on an accelerator), with every such call from our code or Lightning's
recorded against the optimizer step it happened in. Only logging steps may read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightning as L
import torch

from lit_modules.build import build_data, build_model, build_module, run_step_callbacks
from lit_modules.callbacks.divergence import DivergenceGuard
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated
from lit_modules.hook_profiler import NoProfiler

READS = ("item", "tolist", "__float__", "__int__", "__bool__", "cpu", "numpy")
WATCHED = (str(Path(L.__file__).parent), str(Path(build_data.__code__.co_filename).parent))  # Lightning, lit_modules
EVERY, STEPS = 5, 20


class _Batch(L.Callback):
    """Which training batch (0-based) is running: every read in between is charged to it."""

    def __init__(self) -> None:
        self.index = -1

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.index = batch_idx


def test_only_logging_steps_read_a_tensor_on_the_host(monkeypatch, tmp_path: Path) -> None:
    checked = validated(compose_run_config([
        "regime=steps", f"trainer.max_steps={STEPS}", f"trainer.log_every_n_steps={EVERY}", "data.seq_len=32",
        "data.batch_size=4", f"runs_dir={tmp_path}"]))
    cfg, budget = checked.config, checked.budget
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    module = build_module(cfg, model, [], budget, None)
    callbacks = run_step_callbacks(cfg, budget)
    for callback in callbacks:
        if isinstance(callback, DivergenceGuard):
            callback.deferred = True  # what an accelerator gets: losses read together on logging steps
    batch = _Batch()
    reads: dict[int, list[str]] = {}

    def recording(name: str):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code
            if caller.co_filename.startswith(WATCHED) and batch.index >= 0:
                reads.setdefault(batch.index, []).append(f"{name} in {Path(caller.co_filename).name}:{caller.co_name}")
            return original(self, *args, **kwargs)

        return read

    trainer = L.Trainer(
        accelerator="cpu", devices=1, max_steps=budget.steps, max_epochs=-1, limit_val_batches=0,
        num_sanity_val_steps=0, log_every_n_steps=EVERY, logger=L.pytorch.loggers.CSVLogger(tmp_path),
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        profiler=NoProfiler(), callbacks=[*callbacks, batch], **module.trainer_flags(),
    )
    for name in READS:
        monkeypatch.setattr(torch.Tensor, name, recording(name))
    trainer.fit(module, datamodule=data.datamodule)
    monkeypatch.undo()

    logging = {k for k in range(STEPS) if (k + 1) % EVERY == 0}  # the batches whose step the logger writes
    assert set(reads) - logging == set(), {k: v for k, v in reads.items() if k not in logging}
    assert set(reads) == logging  # the loss, grad norm and divergence check are read there: the count sees reads
