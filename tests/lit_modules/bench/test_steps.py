"""The Lightning path and the plain loop do the same per-step work; the callback shares name every
per-step callback and the module's logging (no time is asserted: `make bench` reports them)."""

from __future__ import annotations

import math

from lit_modules.bench import steps
from lit_modules.bench.steps import (
    MemoryLogger,
    callback_shares,
    lightning_seconds_per_step,
    lightning_workload,
    plain_seconds_per_step,
    plain_workload,
)

SHORT = ["model=tiny", "data.seq_len=32", "data.batch_size=4", "trainer.log_every_n_steps=5"]


def test_both_paths_time_the_steps_after_the_warmup():
    for seconds in (plain_seconds_per_step(SHORT, 10, warmup=5), lightning_seconds_per_step(SHORT, 10, warmup=5)):
        assert math.isfinite(seconds) and seconds > 0


def test_both_paths_log_the_same_keys_on_the_same_steps(monkeypatch):
    made: list[MemoryLogger] = []

    class Recording(MemoryLogger):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    monkeypatch.setattr(steps, "MemoryLogger", Recording)
    plain_seconds_per_step(SHORT, 10, warmup=5)
    lightning_seconds_per_step(SHORT, 10, warmup=5)
    plain, lightning = ({key for _, metrics in logger.rows for key in metrics} for logger in made)
    assert lightning - {"epoch"} == plain  # Lightning adds only its epoch counter


def test_callback_shares_cover_every_per_step_callback_and_the_module_logging():
    shares = callback_shares(SHORT, 10, warmup=5)
    assert {"DivergenceGuard", "TokenProgress", "Throughput", "module.log", "module.grad_norm"} <= set(shares)
    assert all(0 <= share < 1 for share in shares.values())


def test_both_workloads_call_the_hook_once_at_the_start_of_every_step():
    for workload in (plain_workload(SHORT), lightning_workload(SHORT)):
        seen: list[int] = []
        workload(seen.append, 4)
        assert seen == [0, 1, 2, 3]
