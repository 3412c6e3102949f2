"""Paired-seed statistics against known answers."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from analysis.stats import bootstrap_ci, compare_paired, paired_t, seed_noise, sign_flip_p


def test_known_shift_is_detected_with_the_right_sign_and_a_covering_interval():
    rng = np.random.default_rng(1)
    base = {str(s): 3.0 + rng.normal(0, 0.05) for s in range(8)}  # large seed-to-seed noise ...
    arm = {s: v - 0.1 + rng.normal(0, 0.005) for s, v in base.items()}  # ... a paired shift of -0.1
    c = compare_paired(arm, base)
    assert c.n == 8
    assert c.mean_diff < 0
    assert c.ci_low <= -0.1 <= c.ci_high
    assert c.ci_high < 0 and c.t_high < 0
    assert c.p_t < 1e-6
    assert c.p_sign_flip == pytest.approx(2 / 2**8)  # every difference negative: only the all-same patterns
    assert c.exact


def test_identical_arms_give_an_interval_around_zero():
    base = {"0": 3.1, "1": 3.2, "2": 3.05, "3": 3.15}
    c = compare_paired(dict(base), base)
    assert c.mean_diff == 0.0 and c.ci_low == 0.0 and c.ci_high == 0.0
    assert c.p_t == 1.0 and c.p_sign_flip == 1.0
    # Symmetric noise around the same mean: the interval straddles zero and nothing is significant.
    arm = {"0": 3.2, "1": 3.1, "2": 3.10, "3": 3.10}  # differences +0.1, -0.1, +0.05, -0.05
    c = compare_paired(arm, base)
    assert c.mean_diff == pytest.approx(0.0, abs=1e-12)
    assert c.ci_low < 0 < c.ci_high and c.t_low < 0 < c.t_high
    assert c.p_t == pytest.approx(1.0) and c.p_sign_flip == pytest.approx(1.0)


def test_sign_flip_p_is_exact_on_tiny_cases():
    # [1, 2, 3]: only all-plus and all-minus reach |mean| = 2 -> 2 of 8 patterns.
    assert sign_flip_p(np.array([1.0, 2.0, 3.0])) == (pytest.approx(0.25), True)
    # [1, -1, 2]: |sum| >= 2 for 6 of the 8 sign patterns (sums 4, 2, -2, 2, -2, -4; two give 0).
    assert sign_flip_p(np.array([1.0, -1.0, 2.0])) == (pytest.approx(0.75), True)
    # A single difference: the flip gives the same |mean|, p = 1.
    assert sign_flip_p(np.array([0.3])) == (1.0, True)


def test_sign_flip_p_goes_monte_carlo_for_many_seeds():
    diffs = np.full(20, 0.5)
    p, exact = sign_flip_p(diffs, n_random=20_000)
    assert not exact
    assert 0 < p < 0.001  # exact value 2 / 2^20; Monte Carlo with +1 correction: 1 / 20,001 at least


def test_paired_t_matches_scipy_and_its_interval():
    arm = np.array([1.0, 2.5, 2.0, 4.0])
    ref = np.array([0.5, 2.0, 2.2, 3.0])
    p, low, high = paired_t(arm - ref)
    assert p == pytest.approx(scipy_stats.ttest_rel(arm, ref).pvalue)
    d = arm - ref
    half = scipy_stats.t.ppf(0.975, 3) * d.std(ddof=1) / 2.0
    assert (low, high) == (pytest.approx(d.mean() - half), pytest.approx(d.mean() + half))
    assert all(math.isnan(x) for x in paired_t(np.array([0.2])))


def test_bootstrap_of_constant_differences_is_a_point():
    assert bootstrap_ci(np.array([0.2, 0.2, 0.2])) == (pytest.approx(0.2), pytest.approx(0.2))
    low, high = bootstrap_ci(np.array([0.0, 1.0]))
    assert 0.0 <= low <= high <= 1.0
    assert all(math.isnan(x) for x in bootstrap_ci(np.array([])))


def test_only_seeds_present_in_both_arms_are_paired():
    c = compare_paired({"0": 1.0, "1": 2.0, "2": float("nan"), "5": 9.0}, {"0": 0.5, "1": 1.0, "2": 1.0, "3": 1.0})
    assert c.seeds == ("0", "1") and c.n == 2
    assert c.mean_diff == pytest.approx(0.75)


def test_seed_noise_is_the_seed_sd_and_the_power_formula_mdd():
    floor = seed_noise([1.0, 2.0, 3.0])
    assert floor.n == 3 and floor.sd == pytest.approx(1.0)
    # (t_0.975,2 + t_0.8,2) * sqrt(2) * sd / sqrt(3), with t_0.975,2 = 4.302653, t_0.8,2 = 1.060660
    assert floor.mdd == pytest.approx((4.302653 + 1.060660) * math.sqrt(2) / math.sqrt(3), rel=1e-5)
    assert math.isnan(seed_noise([1.0]).sd)


def test_holm_on_the_textbook_case_by_hand():
    from analysis.stats import holm_adjust

    # Sorted: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> raised to 0.06 (monotone).
    assert holm_adjust([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-12)


def test_holm_is_monotone_capped_and_skips_nan():
    from analysis.stats import holm_adjust

    p = [0.2, 0.5, 0.01, 0.9, 0.3]
    adjusted = holm_adjust(p)
    order = np.argsort(p)
    assert all(adjusted[i] <= adjusted[j] for i, j in zip(order, order[1:]))  # monotone in p
    assert all(a >= r for a, r in zip(adjusted, p)) and max(adjusted) == 1.0  # never below raw, capped at 1
    with_nan = holm_adjust([0.01, float("nan"), 0.04])
    assert math.isnan(with_nan[1]) and with_nan[0] == pytest.approx(0.02) and with_nan[2] == pytest.approx(0.04)
    assert holm_adjust([0.03]) == [0.03] and holm_adjust([]) == []


def test_t_interval_at_a_bonferroni_level_is_wider():
    c = compare_paired({"0": 1.0, "1": 1.2, "2": 0.9}, {"0": 0.0, "1": 0.0, "2": 0.0})
    low, high = c.t_interval(0.95)
    assert (low, high) == pytest.approx((c.t_low, c.t_high))
    wide = c.t_interval(1 - 0.05 / 6)
    assert wide[0] < low and wide[1] > high
    half = scipy_stats.t.ppf(1 - 0.05 / 12, 2) * c.sd_diff / math.sqrt(3)
    assert wide == pytest.approx((c.mean_diff - half, c.mean_diff + half))
