"""The ledger's first screen: each primary check with what decides it (analysis/glance.py)."""

import math

import pandas as pd

from analysis.families import Component, Families
from analysis.glance import clock_text, components_text, other_rungs_text
from analysis.verdict import CONSISTENT_OPPOSITE, NO_DETECTABLE, REPRODUCED
from tests.helpers.handmade_ablation import handmade


def _row(arm, verdict, diff, low, high, n=8, params=100_000, metric="val/loss", level=0.95):
    return {"arm": arm, "metric": metric, "verdict": verdict, "diff": diff, "ci_low": low, "ci_high": high,
            "ci_level": level, "n": n, "params_non_embedding": params, "test": "difference (t)"}


def test_a_token_speedup_carries_its_cost_per_token_and_its_speedup_on_the_clock():
    row = pd.Series(_row("pc4", REPRODUCED, math.log(1.3), math.log(1.13), math.log(1.51), metric="speedup"))
    cost = pd.DataFrame({"ratio": [1.17]}, index=["pc4"])
    assert clock_text(row, cost) == ", 1.17x wall time per token, so 1.11x on the clock (1.3x in tokens / 1.17x)"
    assert clock_text(row.copy().replace({"speedup": "val/loss"}), cost) == ""  # a loss is no speedup


def test_a_decided_primary_says_what_the_other_rungs_say():
    rows = pd.DataFrame([
        _row("w@tpp1.3", REPRODUCED, -0.0245, -0.047, -0.0017, level=0.983),
        _row("w@tpp1.3@x0.5", CONSISTENT_OPPOSITE, 0.0286, 0.0082, 0.049, params=52_000),
        _row("w@tpp1.3@x4", NO_DETECTABLE, -0.0114, -0.023, 0.0001, params=369_000, n=5),
        _row("w@tpp1.3@x4@lr3e-3", NO_DETECTABLE, -0.02, math.nan, math.nan, n=2),  # a tuning cell: no evidence
        _row("w", NO_DETECTABLE, -0.001, -0.006, 0.003),  # another condition: not a rung of this check
    ])
    text = other_rungs_text(rows.iloc[0], rows)
    assert text == ("; other rungs: x0.5 (52k): consistent with the opposite, +0.0286 [+0.0082, +0.049; 95%]; "
                    "x4 (369k): no detectable effect at this power, -0.0114 [-0.023, +0.0001; 95%]")
    assert other_rungs_text(rows.iloc[4], rows) == ""  # undecided: nothing to qualify


def test_a_recipe_prints_each_declared_components_own_share():
    ab = handmade({"baseline": [3.0, 3.1, 3.2, 3.3], "eps_gate": [2.9, 3.0, 3.1, 3.2],
                   "small_eps_gate": [2.93, 3.04, 3.12, 3.23]}, claim="smoke")
    row = pd.Series({"arm": "small_eps_gate", "metric": "val/loss"})
    families = Families(components=(Component("small_eps_gate", "eps_gate", "val/loss", "small init"),))
    text = components_text(ab, row, families)
    assert text.startswith("; small init's own share (`small_eps_gate` vs `eps_gate`, 4 seeds, secondary): +0.03 [")
    assert text.endswith("; 95%]")
    assert components_text(ab, pd.Series({"arm": "eps_gate", "metric": "val/loss"}), families) == ""


def test_components_are_declared_in_the_protocol_and_a_malformed_one_is_one_sentence():
    import pytest

    from analysis.families import parse_families
    from lit_modules.config.errors import ConfigError

    node = {"primary": [{"arm": "r", "metric": "val/loss"}],
            "components": [{"arm": "r", "without": "r_minus", "metric": "val/loss", "part": "p"}]}
    assert parse_families(node, "x.yaml").components == (Component("r", "r_minus", "val/loss", "p"),)
    with pytest.raises(ConfigError, match=r"^x.yaml: every checks.components entry names an 'arm', .*; got"):
        parse_families({"components": [{"arm": "r", "metric": "val/loss"}]}, "x.yaml")


def test_the_shipped_small_init_protocol_declares_small_inits_own_share():
    from analysis.families import families_for

    from analysis.families import CheckKey

    families = families_for("evidence/small_init")
    assert families.components == (
        Component("small_eps_gate@l4", "baseline_eps_gate@l4", "val/loss", "small init (gamma 1)"),)
    # The same share is a primary row of its own: the recipe against eps + gate alone, at the headline rung.
    assert CheckKey("small_eps_gate@l4", "val/loss", reference="baseline_eps_gate@l4") in families.primary


def test_a_protocol_whose_primaries_have_not_run_says_so_and_names_them():
    from analysis.claims import claim_for
    from analysis.families import CheckKey
    from analysis.glance import claim_line

    ab = handmade({"g8_origin@l2": [2.6, 2.7, 2.8], "g8_qk_vo_tensor@l2": [2.6, 2.7, 2.8]}, claim="wisca")
    rows = pd.DataFrame([{**_row("g8_qk_vo_tensor@l2", NO_DETECTABLE, 0.0, -0.01, 0.01), "role": "secondary"}])
    declared = Families(primary=(CheckKey("g8_qk_vo_tensor@l4", "val/loss"),))
    assert claim_line(ab, claim_for("wisca"), rows, pd.DataFrame(), declared) == (
        "- **wisca**: _no primary check has run yet (declared: `g8_qk_vo_tensor@l4` val/loss)_.")
    assert claim_line(ab, claim_for("wisca"), rows, pd.DataFrame(), Families()) == \
        "- **wisca**: _no primary check declared_."
