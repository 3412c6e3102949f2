"""`python -m sweeps.gpu_cost`: each protocol's headline cells planned at a recipe size, GPU-hours = the cells'
plans x seeds; a bad word is one sentence, exit 2."""

from __future__ import annotations

import pytest

from sweeps.evidence.protocol_file import load_spec
from sweeps.gpu_cost import main, protocol_cells


def test_a_protocol_costs_its_headline_arms_times_their_seeds_and_tuning_cells() -> None:
    cells = protocol_cells(load_spec("small_init"), "gpt2_124m", "h100", 8, "0.4")
    # 8 test seeds + 3 rates x 2 tuning seeds for each tuned arm of the headline; the other stages (the context
    # arm and the gamma-1.5 pair at tiny, @x0.25, @x0.5, @x4) are left out.
    assert {c.arm: c.seeds for c in cells} == {"baseline": 14, "small": 14, "small_eps_gate": 14}
    baseline = next(c for c in cells if c.arm == "baseline")
    assert baseline.tokens_per_step == 524_288 and baseline.steps == 3_240  # 20 TPP, not the preset's CPU tokens
    assert baseline.gpu_hours == pytest.approx(14 * baseline.plan.seconds * 8 / 3600)
    gated = next(c for c in cells if c.arm == "small_eps_gate")
    assert gated.plan.gpu_hours > baseline.plan.gpu_hours  # the gate's weights: more FLOPs and more tokens


def test_a_fine_tune_rate_grid_adds_one_base_per_tuning_seed() -> None:
    cells = protocol_cells(load_spec("wd_plasticity"), "gpt2_124m", "h100", 8, "0.4")
    # 5 test seeds + one base on the tuning seed; the headline's 140-TPP pair runs at 0.5x on the CPU and at the
    # recipe's size here; the below stage (the context decay, the other rungs) is left out.
    assert {c.arm: c.seeds for c in cells} == {"tpp20_wd0.1": 6, "tpp20_wd0.5": 6, "tpp20_wd1.0": 6,
                                               "tpp140_wd0.1": 6, "tpp140_wd0.3": 6}
    tpp140 = next(c for c in cells if c.arm == "tpp140_wd0.3")
    assert tpp140.steps == pytest.approx(7 * next(c for c in cells if c.arm == "tpp20_wd0.1").steps, rel=0.01)


def test_the_tables_print(capsys) -> None:
    assert main(["papers=small_init", "recipes=gpt2_124m", "gpu=a100", "devices=4"]) == 0
    out = capsys.readouterr().out
    assert "GPU plan on 4 x A100 80GB at 40% MFU (assumed)" in out
    assert "| gpt2_124m | 524,288 (32 x 1024 x 4 x 4) | 3,240 (715) |" in out
    assert "| small_init (42) |" in out and "| total |" in out


def test_a_bad_word_is_one_sentence(capsys) -> None:
    assert main(["recipes=gpt3_175b"]) == 2
    assert capsys.readouterr().err.startswith("error: There is no recipe 'gpt3_175b' in conf/recipe/")
