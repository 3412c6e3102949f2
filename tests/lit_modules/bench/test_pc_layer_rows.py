"""The PC benchmark rows are complete and consistent (no timing is asserted: ratios only, in `make bench`)."""

from __future__ import annotations

import math
import statistics

import pytest
from omegaconf import OmegaConf

from lit_modules.bench.steps import bench_config
from lit_modules.bench import pc_layer_rows as bench_module
from lit_modules.bench.pc_layer_rows import excess_points, inference_ratios, training_ratios
from lit_modules.techniques.pc_layer.cost import pc_step_flops

SHORT = ["data.seq_len=32", "data.batch_size=4"]


def test_training_ratios_pair_each_level_with_its_analytic_flops():
    ratios, derived, rows = training_ratios(["tiny"], blocks=1, block_steps=1, warmup=0, extra=SHORT)
    assert [r.key for r in ratios] == ["pc_tiny_level2_vs_baseline", "pc_tiny_level4_vs_baseline"]
    assert set(derived) == {"pc_excess_over_math_tiny_level2", "pc_excess_over_math_tiny_level4"}
    cfg = bench_config(["model=tiny", *SHORT], 2)
    for row, ratio, level in zip(rows, ratios, (2, 4)):
        expected = pc_step_flops(OmegaConf.to_object(cfg.model), level, cfg.data.batch_size * cfg.data.seq_len)
        assert row["analytic_ratio"] == pytest.approx(1 + expected["overhead"])
        assert ratio.clock == "thread" and row["blocks"] == 1
        source, points = derived[f"pc_excess_over_math_tiny_level{level}"][:2]
        assert source == ratio.key
        assert points(ratio.median) == pytest.approx((row["ratio_vs_baseline"] - row["analytic_ratio"]) * 100)
    assert rows[1]["analytic_ratio"] > rows[0]["analytic_ratio"] > 1  # level 4 costs more polynomial


def test_excess_is_in_points_over_the_analytic_ratio():
    assert excess_points(1.164)(1.227) == pytest.approx(6.3)


def test_inference_ratios_time_merged_and_unmerged_against_the_plain_model():
    ratios, rows = inference_ratios("tiny", blocks=2, block_steps=1, warmup=0, extra=SHORT, repeats=2)
    assert [r.key for r in ratios] == ["pc_merged_inference_vs_plain", "pc_unmerged_inference_vs_plain",
                                       "pc_plain_again_inference_vs_plain"]
    assert [r["variant"] for r in rows] == ["tiny_level4_merged", "tiny_level4_unmerged", "tiny_level4_plain_again"]
    assert ratios[2].target is None  # the A/A control has no target: it says what the turns read for no change
    assert all(math.isfinite(r.median) and r.median > 0 for r in ratios)
    for ratio, row in zip(ratios, rows):  # two fresh processes: their 2 blocks each pool, each one's median kept
        assert len(ratio.samples) == 4 and len(ratio.repeats) == 2 and row["repeat_medians"] == list(ratio.repeats)
        assert ratio.repeats == (statistics.median(ratio.samples[:2]), statistics.median(ratio.samples[2:]))
        assert row["batch"] == [4, 32] and row["fresh_process_per_repeat"]


def test_the_tiny_x4_level4_excess_carries_the_issues_target():
    assert bench_module.EXCESS_TARGETS[("tiny_x4", 4)].bound == 5.0
    assert bench_module.MERGED_TARGET.bound == 1.02
