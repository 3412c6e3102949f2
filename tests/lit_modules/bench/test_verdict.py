"""The bench cannot lie: a value is a figure only when its 95 % interval for the median is within +-3 %;
too few values, a wider interval, or a value the work makes impossible are called noisy (synthetic
values: no clock is read here)."""

from __future__ import annotations

import random

import pytest

from lit_modules.bench.verdict import (
    Ratio,
    Target,
    alternate,
    bench_summary,
    median_interval,
    median_rank,
    per_repeat_ratios,
)


@pytest.mark.parametrize("n, rank", [(5, None), (6, 1), (8, 1), (9, 2), (10, 2), (20, 6), (100, 40)])
def test_the_interval_ranks_are_the_binomial_tables(n, rank):
    # Published 95 % order-statistic intervals for the median: n=6 [x1, x6], n=10 [x2, x9],
    # n=20 [x6, x15], n=100 [x40, x61]; below 6 values none exists.
    assert median_rank(n) == rank


def test_the_interval_on_a_known_sample():
    values = list(range(1, 21))
    random.Random(0).shuffle(values)
    assert median_interval(values) == (6, 15)
    assert median_interval([3.0, 1.0, 2.0, 5.0, 4.0]) is None


def test_one_outlier_block_moves_the_interval_by_one_rank_not_by_its_size():
    calm = [1.00 + 0.001 * i for i in range(20)]
    preempted = [*calm[:-1], 25.0]  # one block hit by a neighbour
    assert median_interval(preempted) == median_interval(calm)
    assert Ratio("x", tuple(preempted), clock="thread").problems() == []


def test_a_figure_has_its_interval_within_three_percent():
    tight = Ratio("pc", tuple(1.10 + 0.002 * i for i in range(-5, 6)), at_least=1.0, clock="thread")
    assert tight.median == pytest.approx(1.10)
    assert tight.interval == pytest.approx((1.092, 1.108))  # n = 11: the 2nd smallest and the 2nd largest
    assert tight.half_width == pytest.approx(0.008 / 1.10)
    assert tight.problems() == []


def test_a_wider_interval_is_noisy():
    wide = Ratio("mols", tuple(1.0 + 0.01 * i for i in range(-5, 6)))  # interval 0.96 .. 1.04: +-4 %
    problems = wide.problems()
    assert len(problems) == 1 and problems[0] == "95% interval +-4.0% (wider than +-3%)"


def test_too_few_values_have_no_interval_and_are_noisy():
    assert Ratio("x", (1.0, 1.0, 1.0)).problems() == ["3 value(s): too few for a 95% interval (at least 6)"]
    assert Ratio("x", (1.0,)).summary()["interval_95"] is None


def test_added_computation_faster_than_the_baseline_is_implausible():
    # What the issue saw under load: PC three times faster than the baseline, the blocks agreeing.
    problems = Ratio("pc_small_level2_vs_baseline", (0.335, 0.34, 0.33) * 3, at_least=1.0).problems()
    assert len(problems) == 1 and problems[0].startswith("implausible: 0.335 (interval up to 0.34) is below 1")
    # Within the floor it is not: a 1 % faster "MoLS" step is the same cost, measured twice.
    assert Ratio("mols", (0.99, 0.991, 0.989) * 3, at_least=1.0).problems() == []


def test_more_than_the_cores_allow_is_implausible():
    assert Ratio("sweep", (2.6, 2.65) * 3, at_most=2.0).problems()[0].startswith("implausible: 2.625")
    assert Ratio("sweep", (1.7, 1.72) * 3, at_most=2.0).problems() == []


def test_notes_from_the_measurement_are_problems():
    assert Ratio("eval", (3.0, 3.01) * 3, notes=("scores differ",)).problems() == ["scores differ"]


def test_targets_pass_or_fail_on_the_median_and_say_whether_the_interval_decides():
    assert Target(">=", 0.98).verdict(0.99, (0.985, 0.995)) == {"op": ">=", "bound": 0.98, "passes": True, "decided": True}
    assert Target(">=", 0.98).verdict(0.99, (0.975, 0.995))["decided"] is False
    assert Target("<=", 1.02).verdict(1.05, (1.03, 1.07)) == {"op": "<=", "bound": 1.02, "passes": False, "decided": True}
    assert Target("<=", 1.02).verdict(1.0, None)["decided"] is False
    with pytest.raises(ValueError):
        Target("<", 1.0)


def test_a_row_keeps_its_clock_its_target_and_its_wall_clock_beside():
    summary = Ratio("lightning_speed_vs_plain", (0.99,) * 6, clock="thread", target=Target(">=", 0.98),
                    wall=(0.9, 1.0) * 3).summary()
    assert summary["clock"] == "thread" and summary["target"]["passes"] is True
    assert summary["wall"] == {"median": pytest.approx(0.95), "interval_95": [0.9, 1.0]}


def test_alternate_flips_the_order_every_repeat():
    order: list[str] = []

    def measure(name: str, value: float):
        return lambda: order.append(name) or value

    times = alternate({"a": measure("a", 1.0), "b": measure("b", 2.0)}, repeats=3)
    assert order == ["a", "b", "b", "a", "a", "b"]
    assert times == {"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]}
    assert per_repeat_ratios(times["b"], times["a"]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        per_repeat_ratios([1.0], [1.0, 2.0])


def test_summary_holds_medians_the_noisy_keys_and_derived_values_with_their_targets():
    level4 = tuple(1.10 + 0.001 * i for i in range(-5, 6))
    summary = bench_summary(
        [Ratio("pc_tiny_x4_level4_vs_baseline", level4, at_least=1.0, clock="thread"),
         Ratio("eval_batched_vs_single", (2.0, 3.0, 2.5))],
        derived={"pc_excess_over_math_tiny_x4_level4": ("pc_tiny_x4_level4_vs_baseline",
                                                        lambda r: (r - 1.069) * 100, Target("<=", 5.0))},
    )
    assert summary["pc_tiny_x4_level4_vs_baseline"] == pytest.approx(1.10)
    assert summary["pc_excess_over_math_tiny_x4_level4"] == pytest.approx(3.1)
    detail = summary["details"]["pc_excess_over_math_tiny_x4_level4"]
    assert detail["interval_95"] == pytest.approx([2.7, 3.5]) and detail["clock"] == "thread"
    assert detail["target"]["passes"] is True and detail["target"]["decided"] is True
    assert summary["eval_batched_vs_single"] == 2.5
    assert summary["noisy"] == ["eval_batched_vs_single"]


def test_repeats_widen_the_interval_to_every_repeats_median():
    """Blocks that agree within one process say nothing about the next: the repeats' medians bound the interval."""
    blocks = tuple(1.0 + 0.001 * (i % 3) for i in range(30))  # one tight process: +-0.1%
    alone = Ratio("a_vs_b", blocks)
    assert alone.problems() == []
    spread = Ratio("a_vs_b", blocks, repeats=(0.96, 1.001, 1.05))
    assert spread.interval == (0.96, 1.05)
    assert spread.median == alone.median
    assert spread.half_width == pytest.approx((1.05 - alone.median) / alone.median)  # the larger side
    assert any("wider than +-3%" in p for p in spread.problems())
    assert spread.summary()["repeat_medians"] == [0.96, 1.001, 1.05]
    inside = Ratio("a_vs_b", blocks, repeats=(1.0, 1.002))  # repeats within the pooled interval change nothing
    assert inside.interval == alone.interval
