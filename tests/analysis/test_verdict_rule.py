"""The verdict rule on known answers: t-interval coverage, Holm and TOST on textbook cases, the decision
interval that agrees with the adjusted p, the verdict in parts, floors, probes."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from analysis.ablation import metric_pattern, run_value
from analysis.claims import Check, Claim
from analysis.families import CheckKey, Families, parse_families
from analysis.scale import Scale
from analysis.stats import compare_paired, holm_adjust, holm_divisors, mdd, seeds_needed, t_interval, tost_p
from analysis.verdict import (
    CANNOT_TELL, CONSISTENT, CONSISTENT_OPPOSITE, DID_NOT_REACH, MAG_CONSISTENT, MAG_LARGER, MAG_SMALLER,
    MAG_OPPOSITE_SIDE, MAG_UNKNOWN, NO_DETECTABLE, NOT_TESTABLE, OPPOSITE, PRIMARY, REPRODUCED, SECONDARY, TOO_FEW_SEEDS, Decision,
    Floor, judge, magnitude,
)
from analysis.verdict_table import verdicts_table
from lit_modules.config.errors import ConfigError
from tests.helpers.handmade_ablation import handmade, three_weak_arms, toy_claim

SCALE = Scale(params_total=1.3e5, params_non_embedding=1e5, tokens=2e6, paper_tpp=20.0)


def decision(diffs, role=SECONDARY, divisor=1.0, margin=None, p_holm=math.nan, size=0):
    d = np.asarray(diffs, dtype=float)
    p = tost_p(d.size, d.mean(), d.std(ddof=1), margin) if margin else scipy_stats.ttest_1samp(d, 0).pvalue
    return Decision(role, d.size, float(d.mean()), float(d.std(ddof=1)), float(p), p_holm, size, divisor, margin)


def test_the_t_interval_covers_95_percent_at_three_seeds():
    rng = np.random.default_rng(0)
    draws = rng.normal(0.3, 1.0, size=(4000, 3))
    hits = 0
    for d in draws:
        low, high = t_interval(3, d.mean(), d.std(ddof=1), 0.95)
        hits += low <= 0.3 <= high
    assert hits / len(draws) >= 0.94
    # The bootstrap is no longer an interval below 10 seeds: at n = 3 it was [min, max] and covered ~75%.
    c = compare_paired({"0": 1.0, "1": 2.0, "2": 4.0}, {"0": 0.0, "1": 0.0, "2": 0.0})
    assert math.isnan(c.boot_low) and (c.ci_low, c.ci_high) == pytest.approx(t_interval(3, 7 / 3, c.sd_diff, 0.95))


def test_t_interval_matches_the_textbook_quantiles():
    # n = 3: t_{0.975, 2} = 4.303; n = 5: t_{0.975, 4} = 2.776 (statistics.md).
    assert t_interval(3, 0.0, 1.0, 0.95)[1] == pytest.approx(4.303 / math.sqrt(3), abs=1e-3)
    assert t_interval(5, 0.0, 1.0, 0.95)[1] == pytest.approx(2.776 / math.sqrt(5), abs=1e-3)


def test_holm_on_a_textbook_family_and_its_divisors():
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm_adjust(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # Ranks: 0.005 at 0.05/4 (rejected), 0.01 at 0.05/3 (rejected), 0.03 at 0.05/2 (fails: Holm stops),
    # 0.04 keeps the stop's divisor.
    assert holm_divisors(p, 0.05) == [3.0, 2.0, 2.0, 4.0]
    assert holm_divisors([0.2, float("nan")], 0.05)[0] == 1.0 and math.isnan(holm_divisors([0.2, float("nan")])[1])


@pytest.mark.parametrize("seed", range(40))
def test_holm_p_below_alpha_exactly_when_the_printed_interval_excludes_zero(seed):
    rng = np.random.default_rng(seed)
    samples = [rng.normal(rng.choice([0.0, 0.5, 1.5]), 1.0, size=int(rng.integers(3, 9))) for _ in range(6)]
    p = [scipy_stats.ttest_1samp(d, 0).pvalue for d in samples]
    for d, adj, k in zip(samples, holm_adjust(p), holm_divisors(p, 0.05)):
        low, high = t_interval(d.size, d.mean(), d.std(ddof=1), 1 - 0.05 / k)
        assert (adj < 0.05) == (low > 0 or high < 0)


def test_tost_on_a_textbook_case():
    # mean 0.01, sd 0.02, n = 10, margin 0.05: the two one-sided t statistics are 9.49 and 6.32 on 9 df.
    p = tost_p(10, 0.01, 0.02, 0.05)
    assert p == pytest.approx(scipy_stats.t.sf(0.04 / (0.02 / math.sqrt(10)), 9))
    low, high = t_interval(10, 0.01, 0.02, 0.90)
    assert (p < 0.05) == (-0.05 < low and high < 0.05)
    assert tost_p(10, 0.04, 0.05, 0.05) > 0.05  # too close to the margin to be equivalent


def test_power_columns_on_known_answers():
    # (t_{0.975,4} + t_{0.8,4}) * sd / sqrt(5) = (2.776 + 0.941) * 1 / 2.236
    assert mdd(5, 1.0, 0.05, 0.8) == pytest.approx((2.7764 + 0.9410) / math.sqrt(5), abs=1e-3)
    n = seeds_needed(1.0, 1.0)
    assert mdd(int(n), 1.0) <= 1.0 < mdd(int(n) - 1, 1.0)
    assert seeds_needed(1.0, 1e-6) == math.inf


def test_direction_follows_the_interval_at_its_level():
    better = decision([-0.10, -0.11, -0.12])
    assert judge("better", "lower", better, SCALE).label == CONSISTENT  # secondary: "consistent with"
    primary = decision([-0.10, -0.11, -0.12], PRIMARY, 1.0, p_holm=0.001, size=1)
    assert judge("better", "lower", primary, SCALE).label == REPRODUCED
    assert judge("better", "lower", decision([0.10, 0.11, 0.12], PRIMARY, 1.0, p_holm=0.001, size=1)).label == OPPOSITE
    assert judge("better", "lower", decision([0.10, 0.11, 0.12])).label == CONSISTENT_OPPOSITE
    assert judge("worse", "lower", decision([0.10, 0.11, 0.12])).label == CONSISTENT
    null = judge("better", "lower", decision([-0.03, 0.02, -0.02]), SCALE, paper_effect=-0.5)
    assert null.label == NO_DETECTABLE and null.magnitude == MAG_SMALLER  # the paper's effect is ruled out
    other_side = judge("better", "lower", decision([-0.03, 0.04, 0.02]), SCALE, paper_effect=-0.5)
    assert other_side.label == NO_DETECTABLE and other_side.magnitude == MAG_OPPOSITE_SIDE  # +0.01: not "smaller"
    # An interval that excludes 0 at 95% but not at the Holm level (1 - 0.05/4) has no detectable effect.
    d = decision([-0.05, -0.08, -0.02, -0.06], PRIMARY, 4.0, p_holm=0.09, size=4)
    assert t_interval(4, d.mean_diff, d.sd_diff, 0.95)[1] < 0 and judge("better", "lower", d).label == NO_DETECTABLE
    assert judge("better", "lower", decision([-0.1, -0.12])).label == TOO_FEW_SEEDS
    # The row names its level as a percentage: "97.5% interval" at alpha/2, "95% interval" for a secondary.
    holm2 = decision([-0.10, -0.11, -0.12], PRIMARY, 2.0, p_holm=0.002, size=2)
    assert "97.5% interval [" in judge("better", "lower", holm2).reason
    assert "95% interval [" in judge("better", "lower", better).reason


def test_magnitude_against_the_papers_effect():
    assert magnitude(-0.06, -0.02, -0.04) == MAG_CONSISTENT
    assert magnitude(-0.03, -0.01, -0.04) == MAG_SMALLER
    assert magnitude(0.01, 0.03, -0.04) == MAG_OPPOSITE_SIDE  # an estimate across 0 is not a "smaller" effect
    assert magnitude(-0.03, 0.05, -0.04) == MAG_OPPOSITE_SIDE  # +0.01: the interval holds the paper's, the estimate not
    assert magnitude(-0.05, 0.01, -0.04) == MAG_CONSISTENT  # -0.02 on the paper's side, the interval holds it
    assert magnitude(-0.09, -0.05, -0.04) == MAG_LARGER
    assert magnitude(0.5, 0.7, 0.3) == MAG_LARGER and magnitude(-0.1, 0.1, None) == MAG_UNKNOWN


def test_none_with_a_margin_is_an_equivalence_test():
    tight = decision([0.001, -0.002, 0.0015, -0.001, 0.0005], margin=0.01)
    assert tight.level == pytest.approx(0.90)
    assert judge("none", "lower", tight).label == "consistent with no effect"
    crossing = decision([0.03, -0.05, 0.02], margin=0.01)
    assert judge("none", "lower", crossing).label == CANNOT_TELL


def test_a_metric_at_its_chance_floor_is_not_testable():
    floor = Floor(0.25, 600)
    assert floor.threshold == pytest.approx(0.25 + 2 * math.sqrt(0.25 * 0.75 / 600))
    v = judge("better", "higher", decision([0.01, 0.02, 0.015]), SCALE, reference_mean=0.26, floor=floor)
    assert v.label == NOT_TESTABLE and "chance 0.25" in v.reason
    assert judge("better", "higher", decision([0.01, 0.02, 0.015]), reference_mean=0.40, floor=floor).label == CONSISTENT


def test_a_reference_that_does_not_move_is_not_testable():
    v = judge("better", "higher", decision([0.01, 0.02, 0.015]), SCALE, reference_mean=0.25, reference_sd=0.0)
    assert v.label == NOT_TESTABLE and "same value on every seed (0.25)" in v.reason
    table = verdicts_table(handmade({"baseline": [3.0, 3.0, 3.0], "a": [2.9, 2.95, 2.92]}), toy_claim())
    assert table.iloc[0]["verdict"] == NOT_TESTABLE and table.iloc[0]["short"] == "reference does not move"


def test_the_floor_counts_the_items_each_run_logged():
    from analysis.ablation import items_scored

    ab = handmade({"baseline": [3.0, 3.01, 3.02], "a": [2.9, 2.91, 2.92]})
    assert items_scored(ab, "baseline", "eval/*/acc") == 0  # runs from before eval/<task>/items
    ab.finished["metrics.eval/local_cloze_x/acc"] = 0.26
    ab.finished["metrics.eval/local_nextsent_x/acc"] = 0.27
    ab.finished["metrics.eval/local_cloze_x/items"] = 10.0
    ab.finished["metrics.eval/local_nextsent_x/items"] = 95.0
    ab.finished["metrics.eval/probe/layer_0/items"] = 500.0  # a probe's items are not the zero-shot tasks'
    assert items_scored(ab, "baseline", "eval/*/acc") == 105
    claim = Claim(preset="toy", paper="toy", statement="-", paper_scale="-", paper_tokens=None, default_expect="better",
                  checks=(Check("eval/*/acc", "higher", "-", chance=0.25, items_per_task=300),))
    row = verdicts_table(ab, claim).iloc[0]
    assert row["floor"] == pytest.approx(Floor(0.25, 105).threshold)  # the logged 105, not 2 x 300


def test_a_speedup_not_reached_is_never_an_interval():
    v = judge("better", "higher", decision([0.1, 0.2, 0.3]), SCALE, not_reached="on 3 of 3 seeds; closest +0.01")
    assert v.label == DID_NOT_REACH and "no speedup" in v.reason


def test_zero_shot_and_probes_are_apart():
    pattern = metric_pattern("eval/*/acc")
    assert pattern.match("eval/local_cloze_x/acc") and not pattern.match("eval/probe/layer_0/acc")
    assert metric_pattern("eval/probe/*/acc").match("eval/probe/layer_0/acc")
    row = pd.Series({"metrics.eval/local_cloze_x/acc": 0.3, "metrics.eval/local_nextsent_x/acc": 0.2,
                     "metrics.eval/probe/layer_0/acc": 0.7, "metrics.eval/probe/best_acc": 0.7})
    assert run_value(None, row, "eval/*/acc") == pytest.approx(0.25)
    assert run_value(None, row, "eval/probe/*/acc") == pytest.approx(0.7)


def test_declared_families_put_only_the_primary_checks_under_holm():
    values = three_weak_arms()  # raw p_t about 0.03 each
    ab = handmade(values)
    declared = Families(primary=(CheckKey("a", "val/loss"),), source="test")
    table = verdicts_table(ab, toy_claim(), declared).set_index("arm")
    assert table.loc["a", "role"] == PRIMARY and table.loc["a", "family_size"] == 1
    assert table.loc["a", "p_holm"] == pytest.approx(table.loc["a", "p_t"]) and table.loc["a", "verdict"] == REPRODUCED
    assert (table.loc[["b", "c"], "role"] == SECONDARY).all() and table.loc[["b", "c"], "p_holm"].isna().all()
    assert (table.loc[["b", "c"], "verdict"] == CONSISTENT).all()
    undeclared = verdicts_table(ab, toy_claim()).set_index("arm")  # no protocol: one family of three
    assert (undeclared["family_size"] == 3).all() and (undeclared["verdict"] == NO_DETECTABLE).all()
    assert (undeclared["ci_level"] > 0.95).all()  # Holm over three widens each interval


def test_a_malformed_declaration_is_one_sentence():
    with pytest.raises(ConfigError, match="names an 'arm' and a 'metric'"):
        parse_families({"primary": [{"arm": "a"}]}, "conf/evidence/x.yaml")
    with pytest.raises(ConfigError, match="mapping of"):
        parse_families({"primry": []}, "conf/evidence/x.yaml")
    with pytest.raises(ConfigError, match="positive margin"):
        parse_families({"margins": {"val/loss": -1}}, "conf/evidence/x.yaml")
