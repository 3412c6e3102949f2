"""The verdict rule case by case, and the claims table against the presets it names."""


import pytest
from omegaconf import OmegaConf

from analysis.claims import CLAIMS, claim_for
from analysis.verdict import INCONCLUSIVE, NO_CLAIM, NOT_REPRODUCED, REPRODUCED, Scale, verdict
from analysis.stats import SeedNoise, compare_paired
from tests.helpers.runs import REPO

CONF = REPO / "conf"
SEEDS = ("0", "1", "2")


def comparison(diffs, ref=3.0):
    return compare_paired({s: ref + d for s, d in zip(SEEDS, diffs)}, {s: ref for s in SEEDS[: len(diffs)]})


FLOOR = SeedNoise(3, 0.01, 0.05)
MATCHED = Scale(params_total=1.2e5, params_non_embedding=1e5, tokens=2e6, paper_tpp=20.0)  # 20 TPP
TINY = Scale(params_total=1.2e5, params_non_embedding=1e5, tokens=2e3, paper_tpp=20.0)  # 0.02 TPP


def test_fewer_than_three_seeds_is_inconclusive():
    v = verdict("better", "lower", compare_paired({"0": 2.0, "1": 2.1}, {"0": 3.0, "1": 3.1}), FLOOR, MATCHED)
    assert v.label == INCONCLUSIVE and "2 paired seed" in v.reason


def test_significant_improvement_above_the_floor_is_reproduced():
    v = verdict("better", "lower", comparison([-0.10, -0.11, -0.12]), FLOOR, TINY)
    assert v.label == REPRODUCED
    assert "below matched scale" in v.reason  # the scale gap is still stated


def test_significant_change_the_other_way_is_not_reproduced():
    v = verdict("better", "lower", comparison([0.10, 0.11, 0.12]), FLOOR, TINY)
    assert v.label == NOT_REPRODUCED and "opposite" in v.reason


def test_effect_below_the_seed_sd_is_inconclusive_even_if_significant():
    v = verdict("better", "lower", comparison([-0.005, -0.0051, -0.0052]), FLOOR, MATCHED)
    assert v.label == INCONCLUSIVE and "below the seed sd" in v.reason


def test_null_result_at_a_tiny_budget_is_inconclusive_with_reasons():
    v = verdict("better", "lower", comparison([-0.05, 0.06, -0.02]), FLOOR, TINY, paper_effect=-0.5)
    assert v.label == INCONCLUSIVE
    assert "CI includes zero" in v.reason and "below matched scale" in v.reason


def test_null_result_at_matched_scale_that_rules_out_the_paper_is_not_reproduced():
    # t-interval around +0.0 of half-width ~0.1 cannot contain the paper's -0.5.
    v = verdict("better", "lower", comparison([-0.03, 0.04, 0.02]), FLOOR, MATCHED, paper_effect=-0.5)
    assert v.label == NOT_REPRODUCED and "excludes the paper's effect" in v.reason
    # ... but one that still contains it stays inconclusive.
    v = verdict("better", "lower", comparison([-0.03, 0.04, 0.02]), FLOOR, MATCHED, paper_effect=-0.01)
    assert v.label == INCONCLUSIVE


def test_expectation_none():
    assert verdict("none", "lower", comparison([0.10, 0.11, 0.12]), FLOOR, MATCHED).label == NOT_REPRODUCED
    tight = comparison([0.001, -0.001, 0.0005])
    assert verdict("none", "lower", tight, SeedNoise(3, 0.05, 0.1), MATCHED).label == REPRODUCED
    assert verdict("none", "lower", comparison([0.03, -0.05, 0.02]), FLOOR, MATCHED).label == INCONCLUSIVE


def test_expectation_worse_mirrors_better():
    assert verdict("worse", "lower", comparison([0.10, 0.11, 0.12]), FLOOR, MATCHED).label == REPRODUCED
    assert verdict("worse", "lower", comparison([-0.10, -0.11, -0.12]), FLOOR, MATCHED).label == NOT_REPRODUCED


def test_context_arms_and_missing_measurements():
    assert verdict(None, "lower", comparison([-0.1, -0.1, -0.1]), FLOOR, MATCHED).label == NO_CLAIM
    assert verdict("better", "lower", None).label == INCONCLUSIVE
    assert verdict("better", "higher", compare_paired({}, {})).label == INCONCLUSIVE


def test_unknown_preset_gets_a_neutral_claim():
    claim = claim_for("no_such_preset")
    assert claim.expectation("anything", claim.checks[0]) == (True, None)


def _arms_of(preset: str) -> set[str]:
    return {str(OmegaConf.load(p).ablation.arm) for p in (CONF / "arm" / preset).glob("*.yaml")}


@pytest.mark.parametrize("preset", sorted(CLAIMS))
def test_every_arm_a_claim_names_exists_in_its_preset(preset):
    if not (CONF / "experiment" / f"{preset}.yaml").is_file():
        pytest.skip(f"conf/experiment/{preset}.yaml does not exist yet")
    claim = CLAIMS[preset]
    arms = _arms_of(preset)
    named = set(claim.expect) | set(claim.references.values())
    for check in claim.checks:
        named |= set(check.arms) | set(check.effects) | set(check.relative_effects)
    named |= set(claim.headline)
    assert named <= arms, f"the claim names arms the preset lacks: {sorted(named - arms)}"
    baseline = str(OmegaConf.load(CONF / "experiment" / f"{preset}.yaml").ablation.baseline)
    assert baseline in arms
