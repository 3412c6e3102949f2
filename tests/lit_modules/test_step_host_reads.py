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

from lit_modules.bench.steps import _lightning_fit
from lit_modules.build import build_data
from lit_modules.callbacks.divergence import DivergenceGuard

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

    def prepare(module, callbacks: list) -> None:  # the bench's real fit (bench/steps.py), as on an accelerator
        for callback in callbacks:
            if isinstance(callback, DivergenceGuard):
                callback.deferred = True  # losses read together on logging steps, as off the CPU
        callbacks.append(batch)
        for name in READS:
            monkeypatch.setattr(torch.Tensor, name, recording(name))

    try:
        _lightning_fit(["data.seq_len=32", "data.batch_size=4", f"trainer.log_every_n_steps={EVERY}",
                        f"runs_dir={tmp_path}"], STEPS, 0, wrap=prepare)
    finally:
        monkeypatch.undo()

    logging = {k for k in range(STEPS) if (k + 1) % EVERY == 0}  # the batches whose step the logger writes
    assert set(reads) - logging == set(), {k: v for k, v in reads.items() if k not in logging}
    assert set(reads) == logging  # the loss, grad norm and divergence check are read there: the count sees reads
