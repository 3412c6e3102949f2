"""A run override that lists several values multiplies an ablation grid, as in Hydra's multirun: each value
is a cell of its own, named by that value, and one launch runs them all (how a learning-rate grid is tuned)."""

from pathlib import Path

import pytest

from lit_modules.config.resolvers import rate_text
from sweeps.ablate import main as ablate_main
from tests.helpers.runs import all_runs

NAMED_BY_RATE = "ablation.arm='baseline@lr${rate_text:${optim.lr}}'"


@pytest.mark.parametrize("rate, text", [(0.0015, "1.5e-3"), (0.003, "3e-3"), (0.012, "1.2e-2"), (1.0, "1e0")])
def test_rate_text_spells_a_rate_as_the_lr_variants_do(rate: float, text: str) -> None:
    assert rate_text(rate) == text


def test_each_swept_value_is_a_cell_named_by_it_and_a_rerun_runs_none_again(runs_dir: Path, capsys) -> None:
    args = ["experiment=smoke", "arms=baseline", "seeds=0", f"runs_dir={runs_dir}", "trainer.max_steps=4",
            "workers=2", "report=false", "optim.lr=1e-3,3e-3", NAMED_BY_RATE]
    assert ablate_main(args) == 0
    assert "1 arm x 1 seed x 2 swept values = 2 cells" in capsys.readouterr().out
    cells = [r for r in all_runs(runs_dir) if r.data.tags.get("ablation.arm")]
    assert sorted((c.data.tags["ablation.arm"], float(c.data.params["optim.lr"]), c.info.status) for c in cells) == [
        ("baseline@lr1e-3", 1e-3, "FINISHED"), ("baseline@lr3e-3", 3e-3, "FINISHED")]
    assert len({c.data.tags["config_hash"] for c in cells}) == 2
    # The single-value form of one of those cells is the same cell (same name, same config hash): skipped.
    assert ablate_main([*args[:-2], "optim.lr=3e-3", "ablation.arm=baseline@lr3e-3"]) == 0
    assert "all 1 cells already finished under this parent: nothing to launch" in capsys.readouterr().out
    assert ablate_main(args) == 0
    assert "all 2 cells already finished under this parent: nothing to launch" in capsys.readouterr().out
    # One more value: the finished cells are counted and the grid is launched for the new one.
    assert ablate_main([*args[:-2], "optim.lr=1e-3,3e-3,1e-2", NAMED_BY_RATE]) == 0
    assert "2 of 3 cells already finished under this parent; 1 to run" in capsys.readouterr().out
    cells = [r for r in all_runs(runs_dir) if r.data.tags.get("ablation.arm")]
    assert sorted(c.data.tags["ablation.arm"] for c in cells) == ["baseline@lr1e-2", "baseline@lr1e-3", "baseline@lr3e-3"]


@pytest.mark.parametrize("extra, sentence", [
    (["optim.lr=1e-3,3e-3"], "baseline optim.lr=0.001 and baseline optim.lr=0.003 would both be the cell `baseline`"),
    (["optim.lr=interval(1e-3,3e-3)"], "optim.lr=interval(1e-3,3e-3) is an interval, a search space"),
    (["optim.lr=1e-3,oops", NAMED_BY_RATE], "optim.lr"),
])
def test_a_grid_whose_values_cannot_each_be_a_cell_is_refused_before_any_run(runs_dir: Path, capsys, extra,
                                                                            sentence) -> None:
    assert ablate_main(["experiment=smoke", f"runs_dir={runs_dir}", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and sentence in err and len(err.strip().splitlines()) == 1
    assert not all_runs(runs_dir)
