"""The verdict at matched scale, the family-wise adjustment, arm variants and tuned comparisons, on
hand-made ablations with known answers (tests/helpers/handmade_ablation.py)."""

import math

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from analysis.claims import CLAIMS, claim_for
from analysis.scale import MATCHED_TPP, Scale
from analysis.stats import compare_paired, holm_adjust
from analysis.verdict import (
    MAG_CONSISTENT, MAG_SMALLER, MAG_UNKNOWN, NO_DETECTABLE, NOT_COMPARABLE, NOT_MEASURED, PRIMARY, REPRODUCED,
    Decision, judge,
)
from analysis.verdict_table import verdicts_table
from tests.helpers.handmade_ablation import handmade, three_weak_arms, toy_claim

SEEDS = ("0", "1", "2")


def comparison(diffs, ref=3.0):
    return compare_paired({s: ref + d for s, d in zip(SEEDS, diffs)}, {s: ref for s in SEEDS})


def decided(diffs, divisor=1.0):
    """A primary row of a family of `divisor` tests that Holm judged at alpha / divisor."""
    c = comparison(diffs)
    return Decision(PRIMARY, c.n, c.mean_diff, c.sd_diff, c.p_t, min(1.0, c.p_t * divisor), int(divisor), divisor)


def scale(tpp, paper_tpp):
    return Scale(params_total=1.3e5, params_non_embedding=1e5, tokens=tpp * 1e5, paper_tpp=paper_tpp)


def test_matched_scale_is_20_tpp_or_the_papers_own_when_shorter():
    assert MATCHED_TPP == 20
    assert scale(20, 281).matched and not scale(19.8, 281).matched
    # Budgets are whole optimizer steps: tiny's 20 TPP is 1,043 steps x 2,048 tokens / 106,816 = 19.998 TPP.
    assert scale(1043 * 2048 / 106_816, 281).matched
    assert scale(2, 1.3).matched and not scale(1, 1.3).matched  # WISCA trained at ~1.3 TPP
    assert not scale(10, None).matched and scale(20, None).matched  # unknown paper TPP: 20
    assert math.isnan(Scale(1.0, float("nan"), 1e6).tpp) and not Scale(1.0, float("nan"), 1e6).matched


def test_a_null_result_states_its_scale_and_whether_it_rules_out_the_papers_effect():
    null = decided([-0.03, 0.02, -0.02])  # mean -0.01 on the paper's side; t-interval about [-0.08, +0.06]
    v = judge("better", "lower", null, scale(20, 281), paper_effect=-0.5)
    assert v.label == NO_DETECTABLE and v.magnitude == MAG_SMALLER  # the interval lies short of -0.5
    assert "20 TPP" in v.reason and "the paper's ~281 TPP" in v.reason and "matched scale" in v.reason
    assert "100k non-embedding params (130k total)" in v.reason and "3 paired seeds" in v.reason
    short = judge("better", "lower", null, scale(5, 281), paper_effect=-0.5)
    assert short.label == NO_DETECTABLE and "below matched scale (needs >= 20 TPP)" in short.reason
    no_number = judge("better", "lower", null, scale(20, 281))
    assert no_number.magnitude == MAG_UNKNOWN and "gives no number" in no_number.reason
    assert "scale: unknown" in judge("better", "lower", null, None, paper_effect=-0.5).reason


def test_the_family_adjusted_interval_can_keep_a_paper_effect_in():
    c = comparison([-0.03, 0.04, 0.02])
    effect = c.t_high + 0.05  # outside the 95% interval, inside the interval of a Holm divisor of 20
    assert effect < c.t_interval(1 - 0.05 / 20)[1]
    assert judge("worse", "lower", decided([-0.03, 0.04, 0.02]), scale(20, 20), effect).magnitude == MAG_SMALLER
    wide = judge("worse", "lower", decided([-0.03, 0.04, 0.02], divisor=20), scale(20, 20), effect)
    assert wide.label == NO_DETECTABLE and wide.magnitude == MAG_CONSISTENT and "alpha/20" in wide.reason


def test_holm_across_arms_turns_three_raw_p_of_0_03_into_0_09():
    values = three_weak_arms()  # raw p_t about 0.03 each
    ab = handmade(values)
    table = verdicts_table(ab, toy_claim()).set_index("arm")
    assert (table["family_size"] == 3).all()
    assert table["p_t"].between(0.02, 0.04).all()
    assert table["p_holm"].to_numpy() == pytest.approx(3 * table["p_t"].to_numpy())
    # The 95% interval excludes zero, but the adjusted p does not pass, and the printed interval (at
    # 1 - 0.05/3) contains zero: one statement, no detectable effect.
    assert (table["ci_high"] > 0).all() and (table["verdict"] == NO_DETECTABLE).all()
    alone = verdicts_table(handmade({"baseline": values["baseline"], "a": values["a"]}), toy_claim())
    assert alone["verdict"].tolist() == [REPRODUCED] and alone["p_holm"].tolist() == alone["p_t"].tolist()


def test_variants_compare_within_their_rung_and_state_their_own_scale():
    values = {"origin": [3.0, 3.01, 3.02], "qk_vo_tensor": [2.9, 2.91, 2.92],
              "origin@x4": [2.5, 2.51, 2.52], "qk_vo_tensor@x4": [2.5, 2.512, 2.518]}
    ab = handmade(values, name="evidence_wisca", claim="wisca", baseline="origin", params={"x4": 400_000},
                  tokens=8_000_000)
    assert ab.claim_key == "wisca" and ab.arms == ["origin", "qk_vo_tensor", "origin@x4", "qk_vo_tensor@x4"]
    table = verdicts_table(ab, claim_for(ab.claim_key))
    rows = table[table["metric"] == "val/loss"].set_index("arm")
    assert rows.loc["qk_vo_tensor@x4", "reference"] == "origin@x4" and rows.loc["qk_vo_tensor", "reference"] == "origin"
    assert rows.loc["qk_vo_tensor@x4", "variant"] == "x4" and rows.loc["qk_vo_tensor", "variant"] == "-"
    assert rows.loc["qk_vo_tensor", "tpp"] == pytest.approx(80) and rows.loc["qk_vo_tensor@x4", "tpp"] == pytest.approx(20)
    assert rows.loc["qk_vo_tensor", "verdict"] == REPRODUCED
    # The paper's -2.12% perplexity, as a relative change of the loss, in our units at x4.
    assert rows.loc["qk_vo_tensor@x4", "paper_effect"] == pytest.approx(CLAIMS["wisca"].checks[0].relative_effects["qk_vo_tensor"] * 2.51)
    assert claim_for("wisca").reference_arm("qk_vo_tensor@x4", "origin") == "origin@x4"
    assert claim_for("pc_layer").reference_arm("muon_pc2@x4", "adamw_baseline") == "muon_baseline@x4"
    assert claim_for("wisca").expectation("qk_vo_tensor@x4", claim_for("wisca").checks[0]) == (True, "better")


def test_a_comparison_holds_at_its_references_scale():
    # Small init holds tokens equal: the gated arm's extra parameters lower its own TPP (18.5), but the
    # comparison is made at the reference's budget, 20 TPP: matched scale.
    values = {"baseline": [1.80, 1.81, 1.82], "small_eps_gate": [1.78, 1.791, 1.799]}
    ab = handmade(values, claim="small_init", params={"baseline": 100_000, "small_eps_gate": 108_000},
                  tokens=2_000_000)
    row = verdicts_table(ab, claim_for("small_init")).query("metric == 'val/loss' and arm == 'small_eps_gate'").iloc[0]
    assert row["tpp"] == pytest.approx(20) and bool(row["matched"])


def test_an_arm_whose_reference_did_not_run_gets_no_row():
    # WISCA's g8_* arms are compared with g8_origin; g8_origin itself falls back to the baseline family
    # (origin), which this grid did not run: no row, rather than one with n = 0.
    values = {"g8_origin": [1.80, 1.81, 1.82], "g8_qk_vo_tensor": [1.79, 1.805, 1.81]}
    table = verdicts_table(handmade(values, claim="wisca", baseline="origin"), claim_for("wisca"))
    assert set(table["arm"]) == {"g8_qk_vo_tensor"} and set(table["reference"]) == {"g8_origin"}
    assert table.query("metric == 'val/loss'")["n"].tolist() == [3]


def _mols(values):
    return handmade(values, name="evidence_mols", claim="mols", baseline="baseline@lr1e-3")


def test_tuned_check_compares_each_sides_best_lr_on_the_same_grid():
    values = {"baseline@lr1e-3": [3.00, 3.01, 3.02], "snr@lr1e-3": [2.95, 2.96, 2.975],
              "baseline@lr3e-3": [2.90, 2.91, 2.92], "snr@lr3e-3": [2.80, 2.812, 2.818]}
    table = verdicts_table(_mols(values), claim_for("mols"))
    tuned = table[table["variant"] == "tuned"]
    assert len(tuned) == 1
    row = tuned.iloc[0]
    assert (row["arm"], row["reference"]) == ("snr@lr3e-3", "baseline@lr3e-3")  # both picked by their best mean
    assert "the same LR grid on both sides" in row["selection"] and row["verdict"] == REPRODUCED
    assert row["diff"] == pytest.approx(-0.1, abs=1e-9)
    untuned = table[(table["variant"] != "tuned")].set_index("arm")
    assert untuned.loc["snr@lr1e-3", "reference"] == "baseline@lr1e-3"  # per LR point, within the variant
    assert untuned.loc["snr@lr3e-3", "reference"] == "baseline@lr3e-3"
    # The tuned pick is the very pair the lr3e-3 check tests: one hypothesis on the same seeds, so the family
    # holds the two LR points only, and both rows carry the same adjusted p.
    val = table[table["metric"] == "val/loss"]
    assert (val["family_size"] == 2).all()
    assert row["p_holm"] == untuned.loc["snr@lr3e-3", "p_holm"]
    assert sorted(val.drop_duplicates("arm")["p_holm"]) == pytest.approx(
        sorted(holm_adjust(list(val.drop_duplicates("arm")["p_t"]))))


def test_a_tuned_check_over_different_grids_is_not_called():
    values = {"baseline@lr1e-3": [3.00, 3.01, 3.02], "snr@lr1e-3": [2.95, 2.96, 2.975],
              "snr@lr3e-3": [2.80, 2.812, 2.818]}
    tuned = verdicts_table(_mols(values), claim_for("mols"))
    row = tuned[tuned["variant"] == "tuned"].iloc[0]
    assert "DIFFERENT LR grids" in row["selection"]
    assert row["verdict"] == NOT_COMPARABLE and row["short"] == "LR grids differ"
    lonely = verdicts_table(_mols({"baseline": [3.0, 3.01, 3.02], "snr@lr1e-3": [2.9, 2.91, 2.92]}),
                            claim_for("mols"))
    row = lonely[lonely["variant"] == "tuned"].iloc[0]
    assert row["reference"] == "baseline@lr*" and "no LR variants" in row["selection"]
    assert row["verdict"] == NOT_MEASURED and row["short"] == "not measured"


def test_claim_comes_from_the_tag_else_the_name():
    assert handmade({"baseline": [1.0]}, name="smoke").claim_key == "smoke"
    assert handmade({"baseline": [1.0]}, name="evidence_pc", claim="pc_layer").claim_key == "pc_layer"
    assert claim_for("wd_plasticity_full") is CLAIMS["wd_plasticity"]
    by_param = handmade({"baseline": [1.0]}, name="evidence_mols")
    by_param.runs["params.ablation.claim"] = "mols"  # a preset's `ablation.claim`, logged as a config param
    assert by_param.claim_key == "mols"


@pytest.mark.parametrize("seeds, banded", [(2, False), (3, True)])
def test_curves_with_fewer_than_three_seeds_get_no_band_but_say_so(seeds, banded):
    from analysis.plots import draw_bands

    ab = handmade({"baseline": [3.0, 3.1, 3.2][:seeds], "arm": [2.9, 3.0, 3.1][:seeds]})
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw_bands(ax, ab, ab.curves, "val/loss")
    assert any(isinstance(c, PolyCollection) for c in ax.collections) == banded
    assert any("too few seeds" in t.get_text() for t in ax.texts) != banded


@pytest.mark.parametrize("seeds, bars", [(2, False), (3, True)])
def test_forest_plot_draws_no_ci_bar_below_three_seeds(seeds, bars, tmp_path):
    from analysis.comparisons import effects_table
    from analysis.plots import draw_effects, plot_effects

    ab = handmade({"baseline": [3.0, 3.1, 3.2][:seeds], "arm": [2.9, 3.05, 3.1][:seeds]})
    effects = effects_table(ab, claim_for("smoke"), ["val/loss"])
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    draw_effects(ax, effects, "val/loss", "toy")
    assert bool(ax.containers) == bars  # errorbar containers: the CI bars
    assert any("too few seeds" in t.get_text() for t in ax.texts) != bars
    assert plot_effects(effects, "val/loss", tmp_path / "e.png", "toy").is_file()


def test_a_mixture_of_experts_scale_counts_its_active_parameters():
    # A MoE run records its active non-embedding count (params.budget.params_active_non_embedding); TPP
    # divides by it, as the run's own budget did. 2M tokens / 100k active = 20 TPP, not 2M / 250k = 8.
    from analysis.ablation import scale_of

    ab = handmade({"origin": [3.0, 3.01, 3.02]}, name="wisca_moe", claim="wisca_moe", baseline="origin",
                  params={"origin": 250_000}, tokens=2_000_000)
    assert scale_of(ab, ["origin"]).tpp == pytest.approx(8)
    ab.finished["params.budget.params_active_non_embedding"] = "100000"
    assert scale_of(ab, ["origin"]).tpp == pytest.approx(20)
