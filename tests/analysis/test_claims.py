"""The claims table against the presets it names, and the verdict rule on the cases a claim meets."""


import pytest
from omegaconf import OmegaConf

from analysis.claims import CLAIMS, _check_from_data, claim_for, finetune_tuned_arm, is_finetune_tuning_base
from analysis.scale import Scale
from analysis.stats import compare_paired
from analysis.verdict import (
    NO_CLAIM, NOT_MEASURED, OPPOSITE, PRIMARY, REPRODUCED, SECONDARY, TOO_FEW_SEEDS, Decision, judge,
)
from tests.helpers.arm_files import claim_arm_families
from tests.helpers.runs import REPO

CONF = REPO / "conf"
SEEDS = ("0", "1", "2")
MATCHED = Scale(params_total=1.2e5, params_non_embedding=1e5, tokens=2e6, paper_tpp=20.0)  # 20 TPP
TINY = Scale(params_total=1.2e5, params_non_embedding=1e5, tokens=2e3, paper_tpp=20.0)  # 0.02 TPP


def decided(diffs, role=PRIMARY, ref=3.0) -> Decision:
    """A paired comparison of len(diffs) seeds as a row's Decision (a family of one)."""
    c = compare_paired({s: ref + d for s, d in zip(SEEDS, diffs)}, {s: ref for s in SEEDS[: len(diffs)]})
    return Decision(role, c.n, c.mean_diff, c.sd_diff, c.p_t, c.p_t if role == PRIMARY else float("nan"),
                    1 if role == PRIMARY else 0)


def test_fewer_than_three_seeds_is_too_few():
    v = judge("better", "lower", decided([-1.0, -1.1]), MATCHED)
    assert v.label == TOO_FEW_SEEDS and "2 paired seed" in v.reason


def test_an_effect_on_the_claimed_side_is_reproduced_and_still_states_its_scale():
    v = judge("better", "lower", decided([-0.10, -0.11, -0.12]), TINY)
    assert v.label == REPRODUCED and "below matched scale" in v.reason


def test_an_effect_on_the_other_side_is_opposite():
    assert judge("better", "lower", decided([0.10, 0.11, 0.12]), TINY).label == OPPOSITE
    assert judge("worse", "lower", decided([0.10, 0.11, 0.12]), MATCHED).label == REPRODUCED
    assert judge("worse", "lower", decided([-0.10, -0.11, -0.12]), MATCHED).label == OPPOSITE
    assert judge("better", "higher", decided([0.10, 0.11, 0.12]), MATCHED).label == REPRODUCED


def test_context_arms_and_missing_measurements():
    assert judge(None, "lower", decided([-0.1, -0.12, -0.1])).label == NO_CLAIM
    empty = Decision(SECONDARY, 0, float("nan"), float("nan"), float("nan"))
    assert judge("better", "lower", empty).label == NOT_MEASURED


def test_a_choice_check_names_its_chance_and_items_together():
    node = {"metric": "eval/*/acc", "better": "higher", "paper": "p", "chance": 0.25}
    with pytest.raises(ValueError, match="items_per_task"):
        _check_from_data(node)  # a chance level without the items behind it
    check = _check_from_data({**node, "items_per_task": 300})
    assert (check.chance, check.items_per_task) == (0.25, 300)


def test_unknown_preset_gets_a_neutral_claim():
    claim = claim_for("no_such_preset")
    assert claim.expectation("anything", claim.checks[0]) == (True, None)


@pytest.mark.parametrize("preset", sorted(CLAIMS))
def test_every_arm_a_claim_names_exists_in_its_preset(preset):
    if not (CONF / "experiment" / f"{preset}.yaml").is_file():
        pytest.skip(f"conf/experiment/{preset}.yaml does not exist yet")
    claim = CLAIMS[preset]
    arms = claim_arm_families(preset)
    named = set(claim.expect) | set(claim.references.values())
    for check in claim.checks:
        named |= set(check.arms) | set(check.effects) | set(check.relative_effects)
    named |= set(claim.headline)
    assert named <= arms, f"the claim names arms the preset lacks: {sorted(named - arms)}"
    baseline = str(OmegaConf.load(CONF / "experiment" / f"{preset}.yaml").ablation.baseline)
    assert baseline in arms


def test_a_finetune_tuning_base_is_named_by_its_last_variant_after_any_size_variant():
    assert finetune_tuned_arm("tpp20_wd0.5@ft_tuning") == "tpp20_wd0.5"
    assert finetune_tuned_arm("tpp20_wd0.5@x0.25@ft_tuning") == "tpp20_wd0.5@x0.25"
    assert not is_finetune_tuning_base("tpp20_wd0.5@x0.25")
    assert not is_finetune_tuning_base("tpp20_wd0.5@ft_tuning@x0.25")  # a tuning base's variant comes last
    assert not is_finetune_tuning_base("ft_tuning")
