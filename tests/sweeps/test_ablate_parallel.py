"""Ablation cells run in parallel by default, and parallel cells give exactly the sequential results."""

from pathlib import Path

import pytest

from tests.helpers.runs import all_runs
from sweeps.ablate import Grid, launch_overrides
from sweeps.ablate import main as ablate_main


def _finals(runs_dir: Path) -> dict[tuple[str, str], float]:
    finished = [r for r in all_runs(runs_dir) if r.info.status == "FINISHED" and "ablation.arm" in r.data.tags]
    return {(r.data.tags["ablation.arm"], r.data.tags["seed"]): r.data.metrics["val/loss"] for r in finished}


@pytest.mark.slow  # 41 s (8 cells): make test-slow; make test still runs a parallel grid (test_optuna_sweep)
def test_parallel_cells_equal_sequential_cells_exactly(tmp_path: Path) -> None:
    args = ["experiment=smoke", "trainer.max_steps=12", "trainer.num_threads=1", "report=false"]
    assert ablate_main([*args, f"runs_dir={tmp_path / 'seq'}", "workers=1"]) == 0
    assert ablate_main([*args, f"runs_dir={tmp_path / 'par'}", "workers=2"]) == 0
    sequential, parallel = _finals(tmp_path / "seq"), _finals(tmp_path / "par")
    assert len(sequential) == 4  # 2 arms x 2 seeds
    assert parallel == sequential


def test_default_launch_is_one_worker_per_core_with_the_cores_shared(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    grid = Grid(experiment="smoke", arms=["a", "b", "c"], seeds=["0", "1"])
    assert launch_overrides(grid, None) == ["hydra/launcher=local_parallel", "hydra.launcher.n_jobs=4",
                                            "trainer.num_threads=1"]
    # A preset that asks for 2 threads per cell gets cores / 2 workers, and keeps its thread count.
    assert launch_overrides(grid, 2) == ["hydra/launcher=local_parallel", "hydra.launcher.n_jobs=2"]
    # Never more workers than cells; one worker means Hydra's sequential launcher.
    assert launch_overrides(Grid(experiment="smoke", arms=["a"], seeds=["0", "1"]), None)[1] == "hydra.launcher.n_jobs=2"
    assert launch_overrides(Grid(experiment="smoke", arms=["a"], seeds=["0"]), None) == []
    assert launch_overrides(Grid(experiment="smoke", arms=["a"], seeds=["0"], launcher="slurm"), None) == [
        "hydra/launcher=slurm"]
