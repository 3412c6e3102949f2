"""The PC benchmark rows are complete and consistent (no timing is asserted: ratios only, in `make bench`)."""

from __future__ import annotations

import math

import pytest
from omegaconf import OmegaConf

from lit_modules.bench.steps import bench_config
from lit_modules.techniques.pc_layer.bench import inference_rows, training_rows
from lit_modules.techniques.pc_layer.cost import pc_step_flops


def test_training_rows_pair_each_level_with_its_analytic_flops():
    rows = training_rows(["tiny"], steps=2, repeats=1)
    assert [r["variant"] for r in rows] == ["tiny_level2", "tiny_level4"]
    cfg = bench_config(["model=tiny"], 2)
    for row, level in zip(rows, (2, 4)):
        expected = pc_step_flops(OmegaConf.to_object(cfg.model), level, cfg.data.batch_size * cfg.data.seq_len)
        assert row["analytic_ratio"] == pytest.approx(1 + expected["overhead"])
        assert row["ratio_vs_baseline"] == pytest.approx(row["s_per_step"] / row["baseline_s_per_step"])
        assert row["excess_over_math"] == pytest.approx(row["ratio_vs_baseline"] / row["analytic_ratio"])
    assert rows[1]["analytic_ratio"] > rows[0]["analytic_ratio"] > 1  # level 4 costs more polynomial


def test_inference_rows_time_merged_and_unmerged_against_the_plain_model():
    rows = inference_rows("tiny", repeats=1, iters=1)
    assert [r["variant"] for r in rows] == ["tiny_level4_merged", "tiny_level4_unmerged"]
    assert all(math.isfinite(r["ratio_vs_baseline"]) and r["ratio_vs_baseline"] > 0 for r in rows)
