"""Several grids of one preset, each its own arms, seeds and overrides, run as ONE launch (how an evidence
stage runs each tuned arm at its own rate): every cell runs once, each is the very cell (name, config hash)
its own grid would have run alone, and cells that cannot run together are refused before any run."""

import glob
import json
import tempfile
from pathlib import Path

import pytest

from lit_modules.config.composition import sweep_forms
from sweeps.ablate import cell_overrides, launch_wide_overrides, parse_args, read_grid, run_together
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
    leftovers = sorted(glob.glob(f"{tempfile.gettempdir()}/ablate-cells-*"))
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
    # The sweep's folder is under the grid's runs_dir, with the cells that ran; no temporary cell file is left.
    sweeps = list(together.glob("multirun/*/*/multirun.yaml"))
    assert len(sweeps) == 1 and (sweeps[0].parent / "cells.json").is_file()
    # Only new files count: a test on the other worker may have its own cell file there, and remove it meanwhile.
    assert not set(glob.glob(f"{tempfile.gettempdir()}/ablate-cells-*")) - set(leftovers)
    # Run again: every cell is found finished by its hash, nothing is launched.
    assert run_together([[*COMMON, f"runs_dir={together}", *g] for g in grids]) == 0
    assert "all 4 cells already finished under this parent: nothing to launch" in capsys.readouterr().out
    assert len(_cells(together)) == 4
    # One more seed for one grid: only that grid launches, for its one new cell.
    assert run_together([[*COMMON, f"runs_dir={together}", *grids[0]],
                         [*COMMON, f"runs_dir={together}", "arms=no_decay", "seeds=3,4", *grids[1][2:]]]) == 0
    assert "4 of 6 cells already finished under this parent; 2 to run" in capsys.readouterr().out
    ran = json.loads(sorted(together.glob("multirun/*/*/cells.json"))[-1].read_text())
    assert [c for c in ran if "seed=0" in c or "seed=1" in c] == []  # the finished grid was not launched
    assert len(_cells(together)) == 6


def test_the_cell_list_is_the_basic_sweepers_order() -> None:
    grid = parse_args(["experiment=smoke", "arms=baseline,no_decay", "seeds=0,1", "optim.lr=1e-3,3e-3", "x=1"])
    read_grid(grid)
    cells = cell_overrides(grid)
    assert cells[0] == ["+arm=smoke/baseline", "seed=0", "x=1", "optim.lr=0.001"]
    assert cells[1] == ["+arm=smoke/baseline", "seed=0", "x=1", "optim.lr=0.003"]
    assert cells[2][:2] == ["+arm=smoke/baseline", "seed=1"] and cells[4][0] == "+arm=smoke/no_decay"
    assert len(cells) == 8


def test_runs_dir_and_hydra_settings_are_the_launchs_not_the_cells() -> None:
    grid = parse_args(["experiment=smoke", "arms=baseline", "seeds=0", "runs_dir=elsewhere", "hydra.job.chdir=false", "x=1"])
    read_grid(grid)
    assert cell_overrides(grid) == [["+arm=smoke/baseline", "seed=0", "x=1"]]
    assert grid.runs_dir == "elsewhere"  # on the command line once, from grid.runs_dir
    assert launch_wide_overrides(grid) == ["hydra.job.chdir=false"]


BASE = ["experiment=smoke", "trainer.max_steps=4", "report=false"]


def test_a_swept_override_keeps_its_prefix_once() -> None:
    assert sweep_forms(["+k=a,b", "~j=1,2", "x=1"]) == (["x=1"], [["+k=a", "+k=b"], ["~j=1", "~j=2"]])


@pytest.mark.parametrize("grids, sentence", [
    ([[*BASE, "arms=baseline", "seeds=0"], [*BASE, "arms=baseline", "seeds=0,1", "optim.lr=1e-3"]],
     "the cell `baseline` seed 0 is in two of the grids run together"),
    ([[*BASE, "arms=baseline", "seeds=0", "workers=2"], [*BASE, "arms=no_decay", "seeds=1", "workers=1"]],
     "; these differ: workers."),
])
def test_grids_that_cannot_run_together_are_refused_before_any_run(runs_dir: Path, capsys, grids, sentence) -> None:
    assert run_together([[*g, f"runs_dir={runs_dir}"] for g in grids]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and sentence in err and len(err.strip().splitlines()) == 1
    assert not all_runs(runs_dir)
