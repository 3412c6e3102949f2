"""The bench cannot lie: repeats that disagree, or a ratio the work makes impossible, are called noisy
(synthetic timings: no clock is read here)."""

from __future__ import annotations

import pytest

from lit_modules.bench.verdict import Ratio, alternate, bench_summary, per_repeat_ratios


def test_agreeing_repeats_give_a_trusted_median():
    ratio = Ratio("pc", (1.10, 1.12, 1.11), at_least=1.0)
    assert (ratio.min, ratio.median, ratio.max) == (1.10, 1.11, 1.12)
    assert ratio.problems() == []


def test_repeats_that_disagree_by_more_than_ten_percent_are_noisy():
    problems = Ratio("pc", (1.0, 1.2, 1.05)).problems()
    assert len(problems) == 1 and "disagree by 19%" in problems[0]
    assert Ratio("pc", (1.0, 1.09, 1.05)).problems() == []  # 9 % is within the tolerance


def test_added_computation_faster_than_the_baseline_is_implausible():
    # What the issue saw under load: PC three times faster than the baseline, and the repeats agreeing.
    problems = Ratio("pc_small_level2_vs_baseline", (0.335, 0.34, 0.33), at_least=1.0).problems()
    assert len(problems) == 1 and problems[0].startswith("implausible: 0.335 is below 1")
    # Within the noise it is not: a 1 % faster "PC" step is two honest repeats of the same cost.
    assert Ratio("mols", (0.99, 1.0, 0.995), at_least=1.0).problems() == []


def test_more_than_the_cores_allow_is_implausible():
    assert Ratio("sweep", (2.6, 2.65), at_most=2.0).problems()[0].startswith("implausible: 2.625 is above 2")
    assert Ratio("sweep", (1.7, 1.72), at_most=2.0).problems() == []
    assert Ratio("lightning", (1.2, 1.21, 1.2), at_most=1.0).problems()  # Lightning cannot beat its own loop


def test_one_repeat_is_not_a_measurement_of_noise():
    assert Ratio("x", (1.0,)).problems() == ["one repeat: its noise is unknown"]


def test_notes_from_the_measurement_are_problems():
    assert Ratio("eval", (3.0, 3.1), notes=("scores differ",)).problems() == ["scores differ"]


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


def test_summary_holds_medians_the_noisy_keys_and_derived_values():
    summary = bench_summary(
        [Ratio("pc_tiny_level4_vs_baseline", (1.10, 1.11, 1.12), at_least=1.0),
         Ratio("eval_batched_vs_single", (2.0, 3.0, 2.5))],
        derived={"pc_excess_over_math_tiny_level4": ("pc_tiny_level4_vs_baseline", lambda r: (r - 1.069) * 100)},
    )
    assert summary["pc_tiny_level4_vs_baseline"] == 1.11
    assert summary["pc_excess_over_math_tiny_level4"] == pytest.approx(4.1)
    assert summary["eval_batched_vs_single"] == 2.5
    assert summary["noisy"] == ["eval_batched_vs_single"]
    assert summary["details"]["pc_excess_over_math_tiny_level4"]["min"] == pytest.approx(3.1)
