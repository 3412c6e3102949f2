"""The fixed cost of a cell is measured on real runs in one process (no time is asserted)."""

from __future__ import annotations

import math

from lit_modules.bench.cells import cell_fixed_cost


def test_cell_fixed_cost_reports_the_first_and_the_later_cells():
    cost = cell_fixed_cost(["model=tiny", "data.seq_len=32", "data.batch_size=4"], repeats=2, steps=3)
    assert len(cost["warm_s"]) == 2
    assert all(math.isfinite(s) and s > 0 for s in [cost["first_s"], *cost["warm_s"]])


def test_sweep_seconds_times_a_real_sweep_from_its_first_trial_to_its_last():
    from lit_modules.bench.cells import sweep_seconds

    per_trial: list[float] = []
    seconds = sweep_seconds(1, 2, ["trainer.max_steps=3", "data.seq_len=32", "data.batch_size=4"], trial_seconds=per_trial)
    assert math.isfinite(seconds) and seconds > 0
    # One worker runs its two trials one after the other: the median trial takes at most half the span.
    assert len(per_trial) == 1 and 0 < per_trial[0] <= seconds / 2 + 1e-3


def test_the_compile_bench_knows_a_default_runs_length():
    from lit_modules.bench.compile import default_run_steps
    from lit_modules.config.composition import compose_run_config
    from lit_modules.config.validate import validated

    steps = default_run_steps("tiny")
    assert steps > 0 and steps == validated(compose_run_config(["model=tiny"])).budget.steps
