"""Several grids of one preset, each its own arms, seeds and overrides, run as ONE launch (how an evidence
stage runs each tuned arm at its own rate): every cell runs once, each is the very cell (name, config hash)
its own grid would have run alone, and cells that cannot run together are refused before any run."""

from pathlib import Path

import pytest

from sweeps.ablate import cell_overrides, parse_args, read_grid, run_together
from sweeps.ablate import main as ablate_main
from tests.helpers.runs import all_runs

COMMON = ["experiment=smoke", "trainer.max_steps=4", "workers=2", "report=false"]
NAMED_BY_RATE = "ablation.arm='no_decay@lr${rate_text:${optim.lr}}'"


def _cells(runs_dir: Path) -> dict[tuple[str, str], tuple[str, float, float]]:
    """(arm, seed) -> (config hash, optim.lr, val/loss) of every finished cell."""
    return {(r.data.tags["ablation.arm"], r.data.tags["seed"]):
            (r.data.tags["config_hash"], float(r.data.params["optim.lr"]), r.data.metrics["val/loss"])
            for r in all_runs(runs_dir) if r.data.tags.get("ablation.arm") and r.info.status == "FINISHED"}


def test_grids_with_their_own_arms_seeds_and_rates_run_as_one_launch_and_are_the_same_cells(
        tmp_path: Path, capsys) -> None:
    together, apart = tmp_path / "together", tmp_path / "apart"
    grids = [["arms=baseline", "seeds=0,1", "optim.lr=2e-3"],
             ["arms=no_decay", "seeds=3", "optim.lr=1e-3,3e-3", NAMED_BY_RATE]]
    assert run_together([[*COMMON, f"runs_dir={together}", *g] for g in grids]) == 0
    out = capsys.readouterr().out
    assert "1 arm x 2 seeds + 1 arm x 1 seed x 2 swept values = 4 cells" in out
    assert out.count("ablation 'smoke'") == 1  # one launch
    for g in grids:  # each grid alone, as the evidence driver launched them before
        assert ablate_main([*COMMON, f"runs_dir={apart}", *g]) == 0
    cells = _cells(together)
    assert cells == _cells(apart)  # same cells, same hashes, same losses
    assert sorted(cells) == [("baseline", "0"), ("baseline", "1"), ("no_decay@lr1e-3", "3"), ("no_decay@lr3e-3", "3")]
    assert {k: v[1] for k, v in cells.items()} == {("baseline", "0"): 2e-3, ("baseline", "1"): 2e-3,
                                                   ("no_decay@lr1e-3", "3"): 1e-3, ("no_decay@lr3e-3", "3"): 3e-3}
    # Run again: every cell is found finished by its hash, nothing is launched; no cell file is left behind.
    assert run_together([[*COMMON, f"runs_dir={together}", *g] for g in grids]) == 0
    assert "all 4 cells already finished under this parent: nothing to launch" in capsys.readouterr().out
    assert len(_cells(together)) == 4


def test_the_cell_list_is_the_basic_sweepers_order() -> None:
    grid = parse_args(["experiment=smoke", "arms=baseline,no_decay", "seeds=0,1", "optim.lr=1e-3,3e-3", "x=1"])
    read_grid(grid)
    cells = cell_overrides(grid)
    assert cells[0] == ["+arm=smoke/baseline", "seed=0", "x=1", "optim.lr=0.001"]
    assert cells[1] == ["+arm=smoke/baseline", "seed=0", "x=1", "optim.lr=0.003"]
    assert cells[2][:2] == ["+arm=smoke/baseline", "seed=1"] and cells[4][0] == "+arm=smoke/no_decay"
    assert len(cells) == 8


BASE = ["experiment=smoke", "trainer.max_steps=4", "report=false"]


@pytest.mark.parametrize("grids, sentence", [
    ([[*BASE, "arms=baseline", "seeds=0"], [*BASE, "arms=baseline", "seeds=0,1", "optim.lr=1e-3"]],
     "the cell `baseline` seed 0 is in two of the grids run together"),
    ([[*BASE, "arms=baseline", "seeds=0", "workers=2"], [*BASE, "arms=no_decay", "seeds=1", "workers=1"]],
     "grids run together share their experiment, runs_dir, launcher, workers, report; these differ: workers"),
])
def test_grids_that_cannot_run_together_are_refused_before_any_run(runs_dir: Path, capsys, grids, sentence) -> None:
    assert run_together([[*g, f"runs_dir={runs_dir}"] for g in grids]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and sentence in err and len(err.strip().splitlines()) == 1
    assert not all_runs(runs_dir)
