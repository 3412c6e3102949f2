"""The evidence protocol's fine-tune rate tuning: refused declarations, the choice from tuning bases' fine-tunes
(a known answer), tuning bases kept out of every comparison, and one protocol run end to end."""

from pathlib import Path

import pandas as pd
import pytest

from analysis.finetune_lr_tuning import tuning_base_arm, tuning_runs
from analysis.lr_tuning import LrTuning, chosen_rates, tuning_table
from sweeps.evidence import protocol_file
from sweeps.evidence.declared import declared_checks
from sweeps.evidence.driver import main
from sweeps.evidence.protocol_file import load_spec
from tests.helpers.protocols import assert_refused_before_any_cell

RECIPE = "finetune: python_docs\n"
BLOCKS = "blocks:\n  - {arms: [baseline, no_decay], seeds: [0, 1]}\n"
TUNED = "finetune_lr_tuning: {grid: [3e-4, 1e-3], tuning_seeds: [100]}\n"


@pytest.mark.parametrize("text, sentence", [
    (BLOCKS + TUNED, "finetune_lr_tuning tunes the fine-tune's rate, so it needs a 'finetune' recipe."),
    (RECIPE + BLOCKS + TUNED.replace("[100]", "[1, 100]"),
     "finetune_lr_tuning: tuning seed(s) 1 are also test seeds of `baseline`; a rate chosen on the bases it is "
     "tested on is biased upward"),
    (RECIPE + BLOCKS + "finetune_lr_tuning: {grid: [1e-3], tuning_seeds: [100]}\n",
     "finetune_lr_tuning: grid needs two or more distinct positive rates (got [0.001])."),
    (RECIPE + BLOCKS + "finetune_lr_tuning: {grid: [3e-4, 1e-3]}\n",
     "finetune_lr_tuning needs 'grid' and 'tuning_seeds' (and may name 'metric' and 'arms'); it has grid."),
    (RECIPE + BLOCKS + "finetune_lr_tuning: {grid: [3e-4, 1e-3], tuning_seeds: [100], arms: [snr]}\n",
     "finetune_lr_tuning tunes `snr`, which no block of the protocol runs (its blocks run baseline, no_decay)."),
    (RECIPE + BLOCKS + "finetune_lr_tuning: {grid: [3e-4, 1e-3], tuning_seeds: [100], metric: val/loss}\n",
     "metric is a final metric of the fine-tune runs, such as finetune/target_loss_after (got val/loss)."),
])
def test_a_bad_finetune_grid_is_one_sentence_and_exit_2_before_any_cell(protocol, tmp_path, capsys, text,
                                                                        sentence) -> None:
    assert_refused_before_any_cell(protocol(text), tmp_path, capsys, sentence)


def test_a_command_line_finetune_rate_over_the_tuned_ones_is_refused(protocol, tmp_path, capsys) -> None:
    assert_refused_before_any_cell(protocol(RECIPE + BLOCKS + TUNED), tmp_path, capsys,
                                   "finetune.lr=0.01 on the command line would set every fine-tune's rate, but the "
                                   "protocol tunes each arm's own (finetune_lr_tuning); drop it.", "finetune.lr=0.01")


def test_the_declared_finetune_grid_is_in_the_provenance_hash_and_absent_where_undeclared(protocol) -> None:
    plain = declared_checks(load_spec(protocol(RECIPE + BLOCKS)))
    assert "finetune_lr_tuning" not in plain  # the other protocols' hashes stay as their cells ran
    tuned = declared_checks(load_spec(protocol(RECIPE + BLOCKS + TUNED)))
    assert tuned["finetune_lr_tuning"] == {"arms": ["baseline", "no_decay"], "grid": [3e-4, 1e-3],
                                           "tuning_seeds": [100], "metric": "finetune/target_loss_after",
                                           "key": "finetune.lr"}
    other = declared_checks(load_spec(protocol(RECIPE + BLOCKS + TUNED.replace("1e-3", "3e-3"))))
    assert len({plain["checks_sha256"], tuned["checks_sha256"], other["checks_sha256"]}) == 3


def test_each_arm_gets_the_rate_with_the_lowest_mean_target_loss_over_its_tuning_bases() -> None:
    """Known answer: base `a` is best at 1e-3 on average (seed 100 alone would pick 3e-4), `b@x0.25` (an arm of
    another rung: its tuning base is `b@x0.25@ft_tuning`) at 3e-4; a test base's fine-tune and a failed
    fine-tune are no tuning cells."""
    runs = pd.DataFrame([
        {"run_id": "a100", "arm": tuning_base_arm("a"), "seed": "100"},
        {"run_id": "a101", "arm": tuning_base_arm("a"), "seed": "101"},
        {"run_id": "b100", "arm": tuning_base_arm("b@x0.25"), "seed": "100"},
        {"run_id": "b101", "arm": tuning_base_arm("b@x0.25"), "seed": "101"},
        {"run_id": "a0", "arm": "a", "seed": "0"},
    ])
    after = {("a100", 3e-4): 2.00, ("a100", 1e-3): 2.01, ("a101", 3e-4): 2.20, ("a101", 1e-3): 2.05,
             ("b100", 3e-4): 1.90, ("b100", 1e-3): 1.95, ("b101", 3e-4): 1.91, ("b101", 1e-3): 1.99,
             ("a0", 3e-4): 0.10}  # a test base: far lower, and never read
    finetunes = pd.DataFrame([{"tags.finetune.base_run_id": base, "status": "FINISHED", "start_time": i,
                               "params.optim.lr": str(rate), "tags.end_reason": "completed",
                               "metrics.finetune/target_loss_after": value}
                              for i, ((base, rate), value) in enumerate(after.items())]
                             + [{"tags.finetune.base_run_id": "b101", "status": "FAILED", "start_time": 99,
                                 "params.optim.lr": "0.001", "tags.end_reason": "KeyboardInterrupt",
                                 "metrics.finetune/target_loss_after": float("nan")}])
    tuning = LrTuning(("a", "b@x0.25"), (3e-4, 1e-3), (100, 101), "finetune/target_loss_after", "finetune.lr")
    frame = tuning_runs(runs, finetunes)
    assert sorted(frame["arm"].unique()) == ["a@lr1e-3", "a@lr3e-4", "b@x0.25@lr1e-3", "b@x0.25@lr3e-4"]
    table = tuning_table(tuning, frame)
    assert chosen_rates(table) == {"a": 1e-3, "b@x0.25": 3e-4}
    a = table[table["arm"] == "a"].set_index("rate")["final_loss"]
    assert a[3e-4] == pytest.approx(2.10) and a[1e-3] == pytest.approx(2.03)


def test_a_tuning_base_is_in_the_grid_but_in_no_comparison() -> None:
    from analysis.ablation import ParentRecord, assemble

    runs = pd.DataFrame([{"run_id": f"r{i}", "run_name": "", "status": "FINISHED", "start_time": pd.Timestamp(i),
                          "end_time": pd.Timestamp(i), "tags.ablation.arm": arm, "tags.seed": seed,
                          "params.ablation.baseline": "baseline"}
                         for i, (arm, seed) in enumerate([("baseline", "0"), ("no_decay", "0"),
                                                          ("baseline@ft_tuning", "100"), ("baseline@x0.25", "0"),
                                                          ("baseline@x0.25@ft_tuning", "100")])])
    ab = assemble(ParentRecord("p", "FINISHED", "smoke"), runs, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), [])
    assert ab.arms == ["baseline", "no_decay", "baseline@x0.25"]
    assert "baseline@ft_tuning" in set(ab.finished["arm"])  # still read by the fine-tune rate table


@pytest.mark.slow  # ~2 min on 2 cores: 4 cells, 2 tuning bases, 4 tuning fine-tunes and 4 test fine-tunes
def test_a_protocol_tunes_each_arms_finetune_rate_on_tuning_bases_and_fine_tunes_its_test_bases_at_it(
        tmp_path: Path, monkeypatch) -> None:
    from analysis.provenance import read_provenance
    from analysis.results_data import read_results_data

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "smoke.yaml").write_text("preset: smoke\nfinetune: python_docs\nblocks:\n"
                                      "  - {arms: [baseline, no_decay], seeds: [0, 1]}\n"
                                      "finetune_lr_tuning: {grid: [1e-4, 3e-2], tuning_seeds: [100]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", specs)
    results = tmp_path / "results"
    argv = ["papers=smoke", f"runs_dir={tmp_path / 'runs'}", f"results_dir={results}",
            f"ledger={tmp_path / 'RESULTS.md'}", "trainer.max_steps=6", "finetune.steps=4",
            "finetune.val_every_n_steps=2", "workers=2"]
    assert main(argv) == 0
    data = read_results_data(results / "smoke")
    assert sorted(set(data.finished["arm"])) == ["baseline", "baseline@ft_tuning", "no_decay", "no_decay@ft_tuning"]
    assert data.arms == ["baseline", "no_decay"]  # the tuning bases are in no comparison
    bases = data.finished.set_index("run_id")
    ft = data.finetunes.assign(arm=lambda f: f["tags.finetune.base_run_id"].map(bases["arm"]),
                               rate=lambda f: f["params.optim.lr"].astype(float))
    table = pd.read_csv(results / "smoke" / "lr_tuning.csv")
    chosen = dict(zip(table.loc[table["chosen"], "arm"], table.loc[table["chosen"], "rate"]))
    for arm in ("baseline", "no_decay"):
        tuning = ft[ft["arm"] == f"{arm}@ft_tuning"].set_index("rate")["metrics.finetune/target_loss_after"]
        assert sorted(tuning.index) == [1e-4, 3e-2]  # each tuning base at every rate
        assert chosen[arm] == tuning.idxmin()
        tested = ft[ft["arm"] == arm]
        assert len(tested) == 2 and set(tested["rate"]) == {chosen[arm]}  # its test bases at that rate only
        assert tested["metrics.finetune/target_acc_after"].between(0, 1).all()
    record = read_provenance(results / "smoke")
    assert record["finetune_lr_tuning_chosen"] == chosen and record["finetune_lr_tuning"]["tuning_seeds"] == [100]
    report = (results / "smoke" / "report.md").read_text()
    assert "lr_tuning.png" in report and "finetune.lr" in report
    # Resumed: nothing runs again, the choice and the report stay as they were.
    assert main(argv) == 0
    assert len(read_results_data(results / "smoke").finetunes) == len(data.finetunes)
    assert (results / "smoke" / "report.md").read_text() == report
