"""`python -m sweeps.gpu_cost`: each protocol's headline cells planned at a recipe size, GPU-hours = the cells'
plans x seeds; a bad word is one sentence, exit 2."""

from __future__ import annotations

import pytest

from sweeps.evidence.protocol_file import load_spec
from sweeps.gpu_cost import main, protocol_cells


def test_a_protocol_costs_its_headline_arms_times_their_seeds_and_tuning_cells() -> None:
    cells = protocol_cells(load_spec("small_init"), "gpt2_124m", "h100", 8, "0.4")
    # 8 test seeds + 6 rates x 2 tuning seeds for each tuned arm of the headline (l4), 8 test seeds for each
    # control (it runs at the baseline's tuned rate: no grid of its own); the other stages (l2, l3, l6) are left out.
    assert {c.arm: c.seeds for c in cells} == {"baseline": 20, "small": 20, "small_eps_gate": 20,
                                               "baseline_eps_gate": 20, "baseline_init1": 8, "baseline_lr_quarter": 8}
    baseline = next(c for c in cells if c.arm == "baseline")
    assert baseline.tokens_per_step == 524_288 and baseline.steps == 3_240  # 20 TPP, not the preset's CPU tokens
    assert baseline.gpu_hours == pytest.approx(20 * baseline.plan.seconds * 8 / 3600)
    gated = next(c for c in cells if c.arm == "small_eps_gate")
    assert gated.plan.gpu_hours > baseline.plan.gpu_hours  # the gate's weights: more FLOPs and more tokens


def test_a_fine_tune_rate_grid_adds_one_base_per_tuning_seed() -> None:
    cells = protocol_cells(load_spec("wd_plasticity"), "gpt2_124m", "h100", 8, "0.4")
    # 8 test seeds + the pre-training grid (20 TPP: 6 rates, 140 TPP: 5, x 2 tuning seeds) + one base on the
    # fine-tune's tuning seed; the controls: 8 test seeds, no grid, no fine-tune; the headline's cells run at l4
    # on the CPU and at the recipe's size here; the other stages (l2, l3, l6) are left out.
    assert {c.arm: c.seeds for c in cells} == {"tpp20_wd0.1": 21, "tpp20_wd0.5": 21, "tpp20_wd1.0": 21,
                                               "tpp140_wd0.1": 19, "tpp140_wd0.3": 19, "tpp20_wd0.1_init1": 8,
                                               "tpp20_wd0.1_lr_quarter": 8}
    tpp140 = next(c for c in cells if c.arm == "tpp140_wd0.3")
    assert tpp140.steps == pytest.approx(7 * next(c for c in cells if c.arm == "tpp20_wd0.1").steps, rel=0.01)


def test_the_tables_print(capsys) -> None:
    assert main(["papers=small_init", "recipes=gpt2_124m", "gpu=a100", "devices=4"]) == 0
    out = capsys.readouterr().out
    assert "GPU plan on 4 x A100 80GB at 40% MFU (assumed)" in out
    assert "| gpt2_124m | 524,288 (32 x 1024 x 4 x 4) | 3,240 (715) |" in out
    assert "| small_init (96) |" in out and "| total |" in out


def test_a_bad_word_is_one_sentence(capsys) -> None:
    assert main(["recipes=gpt3_175b"]) == 2
    assert capsys.readouterr().err.startswith("error: There is no recipe 'gpt3_175b' in conf/recipe/")
