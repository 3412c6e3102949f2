"""Learning rates chosen on tuning seeds: the table, the choice, and the report's section, on hand-made runs."""

import math

import pandas as pd
import pytest

from analysis.ablation import assemble
from analysis.lr_tuning import COLUMNS, LrTuning, chosen_rates, rate_text, tuning_table
from analysis.report import render_report
from tests.helpers.handmade_ablation import handmade

TUNING = LrTuning(arms=("baseline", "snr"), grid=(3e-3, 1.5e-3, 6e-3), tuning_seeds=(100, 101))
# Final val/loss per (arm, rate) on seeds 100, 101: baseline is best at 6e-3, snr at 3e-3.
LOSSES = {("baseline", 1.5e-3): [2.40, 2.42], ("baseline", 3e-3): [2.35, 2.37], ("baseline", 6e-3): [2.30, 2.33],
          ("snr", 1.5e-3): [2.31, 2.33], ("snr", 3e-3): [2.26, 2.27], ("snr", 6e-3): [2.29, 2.30]}


def _runs(losses=LOSSES, drop=(), diverged=()) -> pd.DataFrame:
    """A runs frame as the driver and the report read it: one run per tuning cell and seed."""
    rows = []
    for (arm, rate), values in losses.items():
        for seed, value in zip((100, 101), values):
            cell = TUNING.cell_arm(arm, rate)
            if (cell, seed) in drop:
                continue
            failed = (cell, seed) in diverged
            rows.append({"arm": cell, "seed": str(seed), "status": "FAILED" if failed else "FINISHED",
                         "start_time": len(rows), "metrics.val/loss": math.nan if failed else value,
                         "tags.end_reason": "DivergenceError: The training loss became nan at step 7." if failed
                         else "completed"})
    return pd.DataFrame(rows)


def test_each_arm_gets_the_rate_with_the_best_mean_over_its_tuning_seeds() -> None:
    table = tuning_table(TUNING, _runs())
    assert list(table.columns) == list(COLUMNS)
    assert table["rate"].tolist() == [1.5e-3, 3e-3, 6e-3] * 2  # rates ascending per arm, arms as declared
    assert chosen_rates(table) == {"baseline": 6e-3, "snr": 3e-3}
    best = table[table["chosen"]].set_index("arm")
    assert best.loc["baseline", "final_loss"] == pytest.approx(2.315) and best.loc["snr", "final_loss"] == pytest.approx(2.265)
    assert set(table["tuning_seeds"]) == {"100,101"} and (table["n"] == 2).all()
    assert best.loc["baseline", "cell_arm"] == "baseline@lr6e-3"
    assert "highest rate: the best may lie beyond it" in best.loc["baseline", "note"]  # at the grid's edge
    assert best.loc["snr", "note"] == ""


def test_a_diverged_rate_is_ruled_out_and_a_missing_cell_leaves_the_arm_without_a_rate() -> None:
    # baseline diverged at 6e-3 on seed 101: its next best, 3e-3, is chosen.
    table = tuning_table(TUNING, _runs(diverged={("baseline@lr6e-3", 101)}))
    assert chosen_rates(table)["baseline"] == 3e-3
    row = table[(table["arm"] == "baseline") & (table["rate"] == 6e-3)].iloc[0]
    assert math.isnan(row["final_loss"]) and "seed 101 diverged" in row["note"]
    # snr's 3e-3 cell on seed 100 never ran: no rate from a partial grid (it might have been the best).
    table = tuning_table(TUNING, _runs(drop={("snr@lr3e-3", 100)}))
    assert chosen_rates(table) == {"baseline": 6e-3}
    assert (table[table["arm"] == "snr"]["note"].str.contains("no rate chosen: the grid is not complete")).all()
    assert "seed 100 not run" in table[(table["arm"] == "snr") & (table["rate"] == 3e-3)].iloc[0]["note"]


def test_rates_are_spelled_as_the_lr_variants_are() -> None:
    assert [rate_text(r) for r in (1.5e-3, 3e-3, 6e-3, 1.2e-2, 1e-3)] == ["1.5e-3", "3e-3", "6e-3", "1.2e-2", "1e-3"]
    assert LrTuning.from_record(TUNING.record()) == TUNING


def _tuned_ablation(test_rates: dict[str, float]):
    """Test arms on seeds 0-2 at `test_rates`, tuning cells on seeds 100-101 (LOSSES), as one grid."""
    values = {"baseline": [2.30, 2.31, 2.32], "snr": [2.25, 2.262, 2.268]}
    values.update({TUNING.cell_arm(arm, rate): v for (arm, rate), v in LOSSES.items()})
    ab = handmade(values, name="evidence/mols_handmade", claim="mols")
    runs = ab.runs.drop(columns=["arm", "seed"])
    tuning = runs["tags.ablation.arm"].str.contains("@lr")
    runs.loc[tuning, "tags.seed"] = (runs.loc[tuning, "tags.seed"].astype(int) + 100).astype(str)
    runs["params.optim.lr"] = runs["tags.ablation.arm"].map(lambda a: repr(test_rates.get(a, 0.0)))
    return assemble(ab.parent, runs, ab.curves, ab.finetunes, ab.token_gaps, [])


def test_the_report_shows_loss_against_rate_and_writes_lr_tuning_csv(tmp_path) -> None:
    ab = _tuned_ablation({"baseline": 6e-3, "snr": 3e-3})
    provenance = {"lr_tuning": [TUNING.record()], "lr_tuning_chosen": {"baseline": 6e-3, "snr": 3e-3}}
    report = render_report(ab, tmp_path, provenance).read_text()
    table = pd.read_csv(tmp_path / "lr_tuning.csv", keep_default_na=False)
    assert list(table.columns) == [*COLUMNS, "key"] and len(table) == 6 and set(table["key"]) == {"optim.lr"}
    assert table[table["chosen"]][["arm", "rate"]].values.tolist() == [["baseline", 6e-3], ["snr", 3e-3]]
    assert (tmp_path / "lr_tuning.png").is_file() and "![" in report and "lr_tuning.png" in report
    assert "`baseline`: 6e-3; its test runs (seeds 0,1,2) ran at 6e-3." in report
    assert "`snr`: 3e-3; its test runs (seeds 0,1,2) ran at 3e-3. Tuned on 6 finished cells (3 rates x 2 seeds), " \
        "neighbouring rates at most x2 apart." in report
    assert "not the chosen rate" not in report and "the driver chose" not in report


def test_the_report_flags_test_runs_at_another_rate_and_a_different_recorded_choice(tmp_path) -> None:
    ab = _tuned_ablation({"baseline": 3e-3, "snr": 3e-3})
    provenance = {"lr_tuning": [TUNING.record()], "lr_tuning_chosen": {"baseline": 3e-3, "snr": 3e-3}}
    report = render_report(ab, tmp_path, provenance).read_text()
    assert "`baseline`: 6e-3; its test runs (seeds 0,1,2) ran at 3e-3 **(not the chosen rate)** " \
           "**(the driver chose 3e-3 when the cells ran)**." in report


def test_a_muon_grid_reads_the_rate_its_test_runs_ran_at_from_muon_lr(tmp_path) -> None:
    ab = _tuned_ablation({})
    ab.finished["params.optim.muon_lr"] = ab.finished["arm"].map({"baseline": "0.006", "snr": "0.003"})
    muon = LrTuning(TUNING.arms, TUNING.grid, TUNING.tuning_seeds, key="optim.muon_lr")
    report = render_report(ab, tmp_path, {"lr_tuning": [muon.record()]}).read_text()
    assert "`baseline`: 6e-3; its test runs (seeds 0,1,2) ran at 6e-3." in report


def test_no_declared_grid_no_section(tmp_path) -> None:
    report = render_report(_tuned_ablation({}), tmp_path, {"lr_tuning": []}).read_text()
    assert not (tmp_path / "lr_tuning.csv").exists() and "chosen on tuning seeds" not in report
