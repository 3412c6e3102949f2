"""A tuning grid grows by its declared rules: tie-break seeds when two seeds disagree, a rate past a chosen edge.

The driver (sweeps/lr_tuning.tune) asks analysis.lr_tuning.growth what to run next and the report reads back what
the grid grew to from the runs alone; both are checked here on hand-made runs with known answers.
"""

import math

import pandas as pd

from analysis.lr_tuning import LrTuning, chosen_rates, growth, grown_to, tuning_table

GRID = LrTuning(arms=("a", "b"), grid=(2e-3, 2.8e-3, 4e-3), tuning_seeds=(100, 101), tiebreak_seeds=(102,), extend=2)


def _runs(losses: dict[tuple[str, float, int], float]) -> pd.DataFrame:
    return pd.DataFrame([{"arm": GRID.cell_arm(arm, rate), "seed": str(seed), "status": "FINISHED", "start_time": i,
                          "metrics.val/loss": value, "tags.end_reason": "completed"}
                         for i, ((arm, rate, seed), value) in enumerate(losses.items())])


def _bowl(best: dict[str, float], seeds=(100, 101), rates=GRID.grid, tilt: dict | None = None) -> dict:
    """Loss = (log rate - log best)^2 + 2, per arm; `tilt` moves one seed's best."""
    out = {}
    for arm, b in best.items():
        for seed in seeds:
            centre = (tilt or {}).get((arm, seed), b)
            for rate in rates:
                out[(arm, rate, seed)] = (math.log(rate) - math.log(centre)) ** 2 + 2.0
    return out


def test_the_extension_rates_step_as_wide_as_the_grids_outermost_step() -> None:
    below, above = GRID.extension_rates()
    assert below == (1.43e-3, 1.02e-3) and above == (5.71e-3, 8.16e-3)
    assert GRID.lattice() == (1.02e-3, 1.43e-3, 2e-3, 2.8e-3, 4e-3, 5.71e-3, 8.16e-3)


def test_an_interior_choice_on_agreeing_seeds_adds_nothing() -> None:
    runs = _runs(_bowl({"a": 2.8e-3, "b": 2.7e-3}))
    assert growth(GRID, runs) == ((), ())
    assert chosen_rates(tuning_table(GRID, runs)) == {"a": 2.8e-3, "b": 2.8e-3}


def test_seeds_that_disagree_add_the_tiebreak_seed_for_every_arm() -> None:
    # a's seed 101 alone would pick 4e-3, seed 100 2.8e-3: the tie-break seed runs, for a and b alike
    runs = _runs(_bowl({"a": 2.8e-3, "b": 2.8e-3}, tilt={("a", 101): 4.1e-3}))
    assert growth(GRID, runs) == ((), (102,))
    runs = _runs({**_bowl({"a": 2.8e-3, "b": 2.8e-3}, tilt={("a", 101): 4.1e-3}),
                  **_bowl({"a": 2.8e-3, "b": 2.8e-3}, seeds=(102,))})
    assert grown_to(GRID, runs) == (GRID.grid, (100, 101, 102))
    assert growth(GRID, runs) == ((), ())
    table = tuning_table(GRID, runs)
    assert set(table["tuning_seeds"]) == {"100,101,102"} and (table["n"] == 3).all()
    assert chosen_rates(table)["a"] == 2.8e-3


def test_a_choice_at_the_edge_runs_the_next_rate_past_it_until_one_is_inside() -> None:
    best = {"a": 1.3e-3, "b": 2.8e-3}   # a's optimum lies below the declared grid, nearer 1.43e-3 than 1.02e-3
    runs = _runs(_bowl(best))
    assert growth(GRID, runs) == ((1.43e-3,), ())
    runs = _runs(_bowl(best, rates=(1.43e-3, *GRID.grid)))
    assert grown_to(GRID, runs)[0] == (1.43e-3, *GRID.grid)
    assert growth(GRID, runs) == ((1.02e-3,), ())
    runs = _runs(_bowl(best, rates=GRID.lattice()[:-2]))
    assert growth(GRID, runs) == ((), ())   # 1.02e-3 is worse than 1.43e-3: a's choice is inside
    table = tuning_table(GRID, runs)
    assert chosen_rates(table) == {"a": 1.43e-3, "b": 2.8e-3}
    cells = table.groupby("arm")["n"].sum()
    assert cells["a"] == cells["b"] == 10   # 5 rates x 2 seeds each: a pair's arms get equal tuning cells


def test_a_grid_that_has_used_its_extensions_says_its_choice_is_at_the_edge() -> None:
    best = {"a": 3e-4, "b": 2.8e-3}
    runs = _runs(_bowl(best, rates=GRID.lattice()[:-2]))
    assert growth(GRID, runs) == ((), ())
    table = tuning_table(GRID, runs)
    row = table[(table["arm"] == "a") & table["chosen"]].iloc[0]
    assert row["rate"] == 1.02e-3 and "the grid's lowest rate" in row["note"]


def test_an_incomplete_grid_grows_nothing_and_a_plain_grid_never_grows() -> None:
    losses = _bowl({"a": 1.2e-3, "b": 2.8e-3})
    losses.pop(("b", 4e-3, 101))
    assert growth(GRID, _runs(losses)) == ((), ())
    plain = LrTuning(arms=("a", "b"), grid=GRID.grid, tuning_seeds=(100, 101))
    assert growth(plain, _runs(_bowl({"a": 1.2e-3, "b": 2.8e-3}))) == ((), ())
    assert plain.record() == {"arms": ["a", "b"], "grid": list(GRID.grid), "tuning_seeds": [100, 101],
                              "metric": "val/loss", "key": "optim.lr"}   # old provenance records hash the same
    assert LrTuning.from_record(GRID.record()) == GRID
