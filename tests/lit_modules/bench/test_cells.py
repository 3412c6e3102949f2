"""The fixed cost of a cell is measured on real runs in one process (no time is asserted)."""

from __future__ import annotations

import math

import pytest

from lit_modules.bench import cells
from lit_modules.bench.cells import cell_fixed_cost


def test_cell_fixed_cost_reports_the_first_and_the_later_cells_and_where_the_time_goes():
    cost = cell_fixed_cost(["model=tiny", "data.seq_len=32", "data.batch_size=4"], repeats=2, steps=3, phases=True)
    assert len(cost["warm_s"]) == 2
    assert all(math.isfinite(s) and s > 0 for s in [cost["first_s"], *cost["warm_s"]])
    shares = cost["phases"]["package_shares"]
    assert sum(shares.values()) == pytest.approx(1.0) and "Hydra/OmegaConf" in shares
    assert "compose (Hydra)" in cost["phases"]["phase_shares"]


def test_a_package_owns_its_own_time_and_shares_what_it_calls():
    # hydra/compose (self 1 s) and mlflow/store (self 2 s) both call copy.deepcopy (self 3 s), for 1 s and 2 s.
    hydra, mlflow, deep = ("/x/hydra/compose.py", 1, "compose"), ("/x/mlflow/store.py", 1, "log"), ("/lib/copy.py", 1, "deepcopy")
    stats = {hydra: (1, 1, 1.0, 2.0, {}), mlflow: (1, 1, 2.0, 4.0, {}),
             deep: (2, 2, 3.0, 3.0, {hydra: (1, 1, 1.0, 1.0), mlflow: (1, 1, 2.0, 2.0)})}
    owners = cells._owners(stats)
    assert owners[hydra] == {"Hydra/OmegaConf": 1.0}
    assert owners[deep] == pytest.approx({"Hydra/OmegaConf": 1 / 3, "MLflow": 2 / 3})
    assert cells._owners({deep: (1, 1, 1.0, 1.0, {})})[deep] == {cells.OTHER: 1.0}


def test_the_compile_bench_knows_a_default_runs_length():
    from lit_modules.bench.compile import default_run_steps
    from lit_modules.config.composition import compose_run_config
    from lit_modules.config.validate import validated

    steps = default_run_steps("tiny")
    assert steps > 0 and steps == validated(compose_run_config(["model=tiny"])).budget.steps
