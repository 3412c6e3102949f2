"""The fine-tunes a comparison reads: a test base's fine-tunes at its arm's chosen rate only (a stopped and
widened fine-tune grid leaves some at a rate no longer chosen), never averaged with the others."""

import pandas as pd

from analysis.finetune_lr_tuning import at_chosen_rates

RUNS = pd.DataFrame({"run_id": ["b1", "b2", "t1"], "arm": ["a", "b", "a@ft_tuning"]})
FINETUNES = pd.DataFrame({"run_id": ["f1", "f2", "f3", "f4", "f5"],
                          "tags.finetune.base_run_id": ["b1", "b1", "b2", "t1", "t1"],
                          "params.optim.lr": ["0.003", "0.01", "0.003", "0.003", "0.01"]})


def test_a_test_base_keeps_only_its_arms_chosen_rate_and_tuning_bases_keep_every_rate() -> None:
    kept = at_chosen_rates(FINETUNES, RUNS, {"a": 1e-2})
    assert list(kept["run_id"]) == ["f2", "f3", "f4", "f5"]  # b1 at 1e-2; b (no choice) and the tuning base as run


def test_without_a_recorded_choice_every_fine_tune_is_read() -> None:
    assert at_chosen_rates(FINETUNES, RUNS, None).equals(FINETUNES)
    assert at_chosen_rates(FINETUNES, RUNS, {}).equals(FINETUNES)


def test_the_report_and_the_ledger_compare_the_same_fine_tunes() -> None:
    from dataclasses import replace

    from analysis.compared import as_compared
    from tests.helpers.handmade_ablation import handmade

    ab = replace(handmade({"a": [1.0], "b": [1.0]}), runs=RUNS, finetunes=FINETUNES)
    assert as_compared(ab, None) is ab and as_compared(ab, {"git_commit": "x"}) is ab
    assert list(as_compared(ab, {"finetune_lr_tuning_chosen": {"a": 1e-2}}).finetunes["run_id"]) == ["f2", "f3", "f4", "f5"]
