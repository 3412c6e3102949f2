"""The driver's tuning loop runs what a grid's declared rules add (tie-break seed, edge rates) until nothing grows.

The store is replaced by a list the fake launcher appends to (the loop's reading of a real store is covered by the
evidence protocol's end-to-end tests); the losses are a known bowl in log rate per arm.
"""

import math

import pandas as pd

from analysis.lr_tuning import LrTuning
from sweeps import lr_tuning

GRID = LrTuning(arms=("a", "b"), grid=(2e-3, 2.8e-3, 4e-3), tuning_seeds=(100, 101), tiebreak_seeds=(102,), extend=2)
BEST = {("a", 100): 1.3e-3, ("a", 101): 1.3e-3, ("a", 102): 1.3e-3,
        ("b", 100): 2.8e-3, ("b", 101): 4.1e-3, ("b", 102): 2.8e-3}   # b's two tuning seeds disagree


def test_tune_runs_the_tiebreak_seed_then_the_edge_rates_and_chooses_inside(monkeypatch, capsys) -> None:
    rows: list[dict] = []
    launches_seen: list[list] = []

    def run_cells(launches) -> int:
        launches_seen.append(launches)
        for tuning, arm, rates, seeds in launches:
            for rate in rates:
                for seed in seeds:
                    loss = (math.log(rate) - math.log(BEST[(arm, seed)])) ** 2 + 2.0
                    rows.append({"arm": tuning.cell_arm(arm, rate), "seed": str(seed), "status": "FINISHED",
                                 "start_time": len(rows), "metrics.val/loss": loss, "tags.end_reason": "completed"})
        return 0

    monkeypatch.setattr(lr_tuning, "store_runs", lambda runs_dir, preset: pd.DataFrame(rows))
    code, chosen, undecided = lr_tuning.tune("p", [GRID], "unused", "preset", run_cells)
    assert (code, undecided) == (0, [])
    assert chosen == {"a": 1.43e-3, "b": 2.8e-3}
    cells = pd.DataFrame(rows)
    assert len(cells) == len(set(zip(cells["arm"], cells["seed"])))   # no cell ran twice
    per_arm = cells.assign(family=cells["arm"].str.split("@").str[0]).groupby("family").size()
    assert per_arm["a"] == per_arm["b"] == 5 * 3   # 5 rates x 3 seeds each: equal cells for the pair
    assert len(launches_seen) == 4   # the grid; the tie-break seed; 1.43e-3; 1.02e-3
    out = capsys.readouterr().out
    assert "tie-break seed(s) 102" in out and "1.43e-3 added" in out and "1.02e-3 added" in out


def test_a_cell_that_fails_is_tried_once_while_another_grid_grows(monkeypatch) -> None:
    broken = LrTuning(arms=("c",), grid=(2e-3, 4e-3), tuning_seeds=(100,))
    rows: list[dict] = []
    tried: list[str] = []

    def run_cells(launches) -> int:
        for tuning, arm, rates, seeds in launches:
            for rate in rates:
                for seed in seeds:
                    name = tuning.cell_arm(arm, rate)
                    tried.append(name)
                    failed = name == "c@lr4e-3"  # fails every time (out of memory, say)
                    loss = (math.log(rate) - math.log(BEST.get((arm, seed), 3e-3))) ** 2 + 2.0
                    rows.append({"arm": name, "seed": str(seed), "status": "FAILED" if failed else "FINISHED",
                                 "start_time": len(rows), "metrics.val/loss": math.nan if failed else loss,
                                 "tags.end_reason": "RuntimeError: out of memory" if failed else "completed"})
        return 1 if any(r["status"] == "FAILED" for r in rows) else 0

    monkeypatch.setattr(lr_tuning, "store_runs", lambda runs_dir, preset: pd.DataFrame(rows))
    code, chosen, undecided = lr_tuning.tune("p", [GRID, broken], "unused", "preset", run_cells)
    assert tried.count("c@lr4e-3") == 1  # GRID grew three times after it failed
    assert (code, undecided) == (0, ["c"]) and chosen == {"a": 1.43e-3, "b": 2.8e-3}
