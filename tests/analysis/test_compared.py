"""What a report and the ledger compare: a declared rate grid's tuning cells chose the test cells' rates, so they
are no arms of a comparison; they stay in the runs, where the learning-rate section rebuilds each grid."""

from analysis.compared import as_compared, tuning_arms
from analysis.report_context import ReportContext
from tests.helpers.handmade_ablation import handmade, toy_claim

GRID = {"arms": ["baseline", "trick"], "grid": [1e-3, 2e-3], "tuning_seeds": [0, 1], "extend": 1}
RECORD = {"lr_tuning": [GRID]}
VALUES = {
    "baseline": [2.0, 2.1, 2.2], "trick": [1.9, 2.0, 2.1],
    "baseline@lr1e-3": [2.3, 2.4], "baseline@lr2e-3": [2.2, 2.3],
    "trick@lr1e-3": [2.3, 2.4], "trick@lr2e-3": [2.2, 2.3], "trick@lr4e-3": [2.25, 2.35],  # grown past the edge
    "baseline@lr8e-3": [2.0, 2.1, 2.2], "trick@lr8e-3": [2.1, 2.2, 2.2],  # a compared variant, past the grid
}


def test_a_grids_cells_including_its_grown_rates_are_no_arms_but_stay_runs() -> None:
    ab = handmade(VALUES)
    compared = as_compared(ab, RECORD)
    kept = {"baseline", "trick", "baseline@lr8e-3", "trick@lr8e-3"}
    assert compared.arms == [a for a in ab.arms if a in kept] and len(compared.arms) == 4
    assert set(compared.finished["arm"]) == kept
    assert compared.runs.equals(ab.runs)  # the learning-rate section and the edge gate read the grid from here
    assert "trick@lr4e-3" in tuning_arms(RECORD) and "baseline@lr4e-3" in tuning_arms(RECORD)


def test_without_a_declared_grid_every_arm_is_compared() -> None:
    ab = handmade(VALUES)
    assert as_compared(ab, None) is ab and as_compared(ab, {"git_commit": "x"}) is ab


def test_a_fine_tune_grids_bases_are_no_arms() -> None:
    record = {"finetune_lr_tuning": {"arms": ["baseline"], "grid": [1e-3, 3e-3], "tuning_seeds": [0, 1],
                                     "metric": "finetune/target_loss_after", "key": "finetune.lr"}}
    ab = handmade({"baseline": [2.0, 2.1], "baseline@ft_tuning": [2.0, 2.1], "trick": [1.9, 2.0]})
    assert as_compared(ab, record).arms == ["baseline", "trick"]


def test_the_reports_tables_hold_no_tuning_cell_and_its_runs_say_where_they_went(tmp_path) -> None:
    ctx = ReportContext.of(handmade(VALUES), toy_claim(), tmp_path, RECORD)
    tuning = tuning_arms(RECORD)
    assert set(ctx.effects["arm"]) == {"trick", "trick@lr8e-3"}
    assert not set(ctx.summary["arm"]) & tuning and not set(ctx.noise["reference"]) & tuning
    assert not set(ctx.verdicts["arm"]) & tuning and set(ctx.verdicts["arm"]) == {"trick", "trick@lr8e-3"}
    counted = dict(zip(ctx.runs["arm"] + "/" + ctx.runs["seed"].astype(str), ctx.runs["counted"]))
    assert counted["trick@lr4e-3/1"] == "rate tuning" and counted["trick/2"] == "yes"
    assert len(ctx.runs) == sum(len(v) for v in VALUES.values())  # every run is still listed
