"""The trend over rungs: a weighted line of the per-rung effects against ln N, and the words for it."""

import math

import numpy as np
import pandas as pd
import pytest

from analysis.report import render_report
from scipy import stats as scipy_stats

from analysis.trend import (CHANGES_SIGN, GROWS, NO_FINITE_RUNG, NO_TREND, NOT_FROM_ONE, NOT_FROM_TWO, SHRINKS,
                            fit_trend, pooled_effect)
from analysis.trend_report import trend_family, trend_table
from tests.helpers.handmade_ablation import handmade

SIZES = [100_000, 400_000, 1_600_000]


def test_three_rungs_with_effects_exactly_linear_in_log_n_give_that_slope() -> None:
    effects = [0.1 - 0.01 * math.log(n) for n in SIZES]  # -0.015, -0.029, -0.043: a loss falling further
    ses = [0.0002, 0.0003, 0.0004]
    trend = fit_trend(SIZES, effects, ses, claimed=-1)
    assert trend.slope == pytest.approx(-0.01, rel=1e-9) and trend.rungs == 3 and trend.inflation == 1.0
    # The interval is numpy's weighted fit (unscaled covariance) on t with k - 2 = 1 degree of freedom (12.71).
    _, cov = np.polyfit(np.log(SIZES), effects, 1, w=1 / np.array(ses), cov="unscaled")
    t1 = scipy_stats.t.ppf(0.975, 1)
    assert t1 == pytest.approx(12.706, abs=1e-3)
    assert (trend.high - trend.low) / 2 == pytest.approx(t1 * math.sqrt(cov[0, 0]), rel=1e-9)
    # The SEs of the statistics.md example (0.002-0.004) give no detectable trend on 1 degree of freedom.
    assert fit_trend(SIZES, effects, [0.002, 0.003, 0.004], claimed=-1).statement == NO_TREND
    assert trend.high < 0 and trend.statement == GROWS
    assert trend.direction == "fitted line in the claimed direction at the largest rung"


def test_two_rungs_are_not_a_trend() -> None:
    trend = fit_trend(SIZES[:2], [-0.01, -0.03], [0.001, 0.001], claimed=-1)
    assert trend.statement == NOT_FROM_TWO == "not estimable from two rungs" and math.isnan(trend.slope)
    # A rung without a standard error (too few seeds) is no point: three rungs measured, two usable.
    assert fit_trend(SIZES, [-0.01, -0.02, -0.03], [0.001, math.nan, 0.001]).statement == NOT_FROM_TWO
    assert fit_trend(SIZES, [-0.01, math.nan, math.nan], [0.001, math.nan, math.nan]).statement == NOT_FROM_ONE
    assert fit_trend(SIZES, [math.nan] * 3, [math.nan] * 3).statement == NO_FINITE_RUNG


def test_a_speedup_that_never_happens_says_why_no_rung_is_used() -> None:
    # Three rungs, enough seeds at each, but the arm never reached the reference's loss: no difference exists.
    verdicts = pd.DataFrame([
        {"arm": f"pc{v}", "reference": f"base{v}", "variant": v.lstrip("@") or "-", "role": "primary",
         "metric": "speedup", "n": 8, "diff": math.nan, "sd_diff": math.nan, "params_non_embedding": n,
         "expect": "better", "better": "higher", "verdict": "did not reach"}
        for v, n in zip(["@x0.25", "@x0.5", ""], SIZES)])
    row = trend_table(verdicts).iloc[0]
    assert row["statement"] == NO_FINITE_RUNG and row["rungs_measured"] == 3 and row["rungs_fitted"] == 0
    assert row["rungs"].startswith("x0.25 (N=100k): not used (no finite difference on 8 seeds: did not reach)")


def test_scatter_beyond_the_errors_widens_the_interval_to_no_detectable_trend() -> None:
    trend = fit_trend(SIZES, [0.01, -0.01, 0.005], [0.004, 0.004, 0.004], claimed=-1)
    assert trend.inflation > 1 and trend.low < 0 < trend.high and trend.statement == NO_TREND


def test_the_statement_reads_the_size_of_the_effect_and_its_sign_against_the_claim() -> None:
    ses = [0.001] * 3
    # A benefit fading toward 0 with N: |effect| shrinks (still in the claimed direction at the top).
    fading = fit_trend(SIZES, [-0.04, -0.03, -0.02], ses, claimed=-1)
    assert fading.statement == SHRINKS and fading.direction.startswith("fitted line in the claimed")
    # A harm growing with N: |effect| grows, against the claimed direction.
    harm = fit_trend(SIZES, [0.01, 0.02, 0.03], ses, claimed=-1)
    assert harm.statement == GROWS and harm.direction.startswith("fitted line against the claimed")
    # The direction reads the fitted line at the largest rung, which can have the other sign than that rung's
    # measured effect (+0.002 here, the line below 0 there): it says so.
    scattered = fit_trend(SIZES, [0.02, -0.013, 0.002], [0.014, 0.015, 0.008], claimed=-1)
    assert scattered.direction == "fitted line in the claimed direction at the largest rung"
    # The line crosses 0 between the rungs.
    assert fit_trend(SIZES, [-0.02, 0.0, 0.02], ses, claimed=-1).statement == CHANGES_SIGN
    assert fit_trend(SIZES, [-0.02, 0.0, 0.02], ses, claimed=0).direction == "the paper claims no effect"


def test_a_rung_is_a_trailing_x_factor_and_what_precedes_it_the_trend_family() -> None:
    assert [trend_family(a) for a in ["a", "a@x4", "a@x0.25", "a@x16", "a@tpp1.3@x4", "a@tpp1.3"]] == [
        "a", "a", "a", "a", "a@tpp1.3", "a@tpp1.3"]
    # Not sizes: a condition, an LR point (at any size), a name that only starts like a factor.
    assert [trend_family(a) for a in ["a@gqa", "a@lr3e-3", "a@x4@lr3e-3", "a@xl", "a@x4b"]] == [
        "a@gqa", "a@lr3e-3", "a@x4@lr3e-3", "a@xl", "a@x4b"]


def _ladder(rungs: dict[str, int]) -> pd.DataFrame:
    """Paired effects exactly 0.1 - 0.01 ln N at each rung, seed noise +-0.001 around them (mean exact)."""
    values = {}
    for variant, n in rungs.items():
        suffix = f"@{variant}" if variant else ""
        base = [3.0, 3.01, 3.02]
        effect = 0.1 - 0.01 * math.log(n)
        values[f"baseline{suffix}"] = base
        values[f"no_decay{suffix}"] = [b + effect + e for b, e in zip(base, (0.001, 0.0, -0.001))]
    return values


def test_the_report_writes_trend_csv_and_rungs_csv(tmp_path) -> None:
    rungs = {"": SIZES[0], "x4": SIZES[1], "x16": SIZES[2]}
    ab = handmade(_ladder(rungs), claim="smoke", params={"x4": SIZES[1], "x16": SIZES[2]})
    report = render_report(ab, tmp_path).read_text()
    trend = pd.read_csv(tmp_path / "trend.csv")
    assert len(trend) == 1
    row = trend.iloc[0]
    assert (row["check"], row["arm_family"], row["reference_family"]) == ("val/loss", "no_decay", "baseline")
    assert row["slope"] == pytest.approx(-0.01, rel=1e-6) and row["high"] < 0 and row["statement"] == GROWS
    assert row["rungs_fitted"] == 3 and "x16 (N=1.6M)" in row["rungs"]
    scale = pd.read_csv(tmp_path / "rungs.csv", keep_default_na=False)
    assert scale["rung"].tolist() == ["-", "x4", "x16"]
    assert scale["params_non_embedding"].tolist() == SIZES
    assert scale["tpp"].tolist() == pytest.approx([2_000_000 / n for n in SIZES])
    assert {"params_total", "tokens", "reference"} <= set(scale.columns)
    assert "## Trend with scale" in report and "grows with scale" in report


def test_two_rungs_in_the_report_say_not_estimable_and_one_rung_draws_nothing(tmp_path) -> None:
    ab = handmade(_ladder({"": SIZES[0], "x4": SIZES[1]}), claim="smoke", params={"x4": SIZES[1]})
    render_report(ab, tmp_path / "two")
    trend = pd.read_csv(tmp_path / "two" / "trend.csv")
    assert trend["statement"].tolist() == [NOT_FROM_TWO] and trend["slope"].isna().all()
    one = render_report(handmade(_ladder({"": SIZES[0]}), claim="smoke"), tmp_path / "one").read_text()
    assert not (tmp_path / "one" / "trend.csv").exists() and "Trend with scale" not in one


def test_a_condition_arm_gets_a_trend_over_its_own_rungs_beside_the_plain_one(tmp_path) -> None:
    # `no_decay@c` (a condition such as the paper's TPP) at three sizes: its own trend family, reference
    # `baseline@c@x<f>` at each rung, apart from the plain arm's two rungs; its LR point is no rung of it.
    values = {**_ladder({"": SIZES[0], "x4": SIZES[1]}),
              **_ladder({"c": SIZES[0], "c@x4": SIZES[1], "c@x16": SIZES[2]}),
              "baseline@c@lr3e-3": [3.0, 3.01, 3.02], "no_decay@c@lr3e-3": [2.0, 2.01, 2.02]}
    params = {"x4": SIZES[1], "c@x4": SIZES[1], "c@x16": SIZES[2]}
    report = render_report(handmade(values, claim="smoke", params=params), tmp_path).read_text()
    trend = pd.read_csv(tmp_path / "trend.csv").set_index("arm_family")
    assert sorted(trend.index) == ["no_decay", "no_decay@c"]
    assert trend.loc["no_decay", "statement"] == NOT_FROM_TWO and trend.loc["no_decay@c", "reference_family"] == "baseline@c"
    assert trend.loc["no_decay@c", "rungs_measured"] == 3 and trend.loc["no_decay@c", "statement"] == GROWS
    assert trend.loc["no_decay@c", "slope"] == pytest.approx(-0.01, rel=1e-6)
    assert trend.loc["no_decay@c", "rungs"].startswith("base (N=100k)") and "x16 (N=1.6M)" in trend.loc["no_decay@c", "rungs"]
    rungs = pd.read_csv(tmp_path / "rungs.csv", keep_default_na=False)
    assert rungs["rung"].tolist() == ["-", "c", "x4", "c@x4", "c@x16"]  # smallest first, the LR point not a rung
    assert rungs["reference"].tolist() == ["baseline", "baseline@c", "baseline@x4", "baseline@c@x4", "baseline@c@x16"]
    assert "| no_decay@c |" in report.replace("`", "")


def test_the_pooled_effect_is_dersimonian_laird_on_t_with_k_minus_1_degrees_of_freedom() -> None:
    # Rungs that agree within their SEs: tau^2 = 0 and the pooled mean is the inverse-variance mean.
    same = pooled_effect(SIZES, [-0.02, -0.021, -0.019], [0.002, 0.002, 0.002])
    assert same.tau2 == 0 and same.effect == pytest.approx(-0.02)
    half = scipy_stats.t.ppf(0.975, 2) * 0.002 / math.sqrt(3)
    assert (same.low, same.high) == pytest.approx((-0.02 - half, -0.02 + half))
    # Rungs that disagree far beyond their SEs: tau^2 = (Q - (k - 1)) / (sum w - sum w^2 / sum w).
    split = pooled_effect(SIZES, [-0.03, 0.0, 0.03], [0.003, 0.003, 0.003])
    w = 1 / 0.003**2
    q = w * (0.03**2 * 2)
    assert split.tau2 == pytest.approx((q - 2) / (3 * w - 3 * w**2 / (3 * w)))
    assert split.effect == pytest.approx(0.0, abs=1e-12) and split.low < -0.03 and split.high > 0.03
    assert math.isnan(pooled_effect(SIZES[:1], [-0.02], [0.002]).effect)


def test_a_prediction_interval_adds_the_rungs_own_error_to_the_lines() -> None:
    line = fit_trend(SIZES, [0.1 - 0.01 * math.log(n) for n in SIZES], [0.0002, 0.0003, 0.0004]).line
    at, low, high = line.predict(6_400_000)
    assert at == pytest.approx(0.1 - 0.01 * math.log(6_400_000))
    _, wider_low, wider_high = line.predict(6_400_000, own_se=0.01)
    assert wider_low < low < at < high < wider_high
    assert (wider_high - wider_low) / 2 == pytest.approx(
        scipy_stats.t.ppf(0.975, 1) * math.sqrt(((high - low) / 2 / scipy_stats.t.ppf(0.975, 1)) ** 2 + 0.01**2))
