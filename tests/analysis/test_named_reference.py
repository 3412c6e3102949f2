"""A primary check may name its own reference cell (`checks.primary: [{arm, metric, reference}]`): its own row,
judged in the one Holm family with the other primaries, beside the arm's usual row (analysis/families.py,
analysis/verdict_table.py); a reference the protocol does not run is refused in one sentence."""

import math

import pytest
from scipy import stats as scipy_stats

from analysis.claims import Check, Claim
from analysis.families import checks_sha256, parse_families, validate_against
from analysis.verdict import MAG_CONSISTENT, MAG_UNKNOWN, PRIMARY, REPRODUCED, SECONDARY
from analysis.verdict_audit import audit_table
from analysis.verdict_table import verdicts_table
from lit_modules.config.errors import ConfigError
from tests.helpers.handmade_ablation import handmade

WHERE = "conf/evidence/toy.yaml"
CLAIM = Claim(preset="toy", paper="-", statement="-", paper_scale="-", paper_tokens=None,
              checks=(Check("val/loss", "lower", "-", effects={"x": -0.08}),), default_expect="better",
              paper_tpp=20.0)
BASE = [3.00, 3.02, 3.01, 3.03]
X = [b - 0.10 + e for b, e in zip(BASE, (0.01, -0.01, 0.02, -0.02))]  # x - baseline: mean -0.10
X_PART = [x + 0.03 + e for x, e in zip(X, (0.01, -0.01, 0.02, -0.02))]  # x - x_part: mean -0.03
USUAL = {"arm": "x", "metric": "val/loss"}
NAMED = {"arm": "x", "metric": "val/loss", "reference": "x_part"}


def _table(primary, **checks):
    ab = handmade({"baseline": BASE, "x": X, "x_part": X_PART})
    return verdicts_table(ab, CLAIM, parse_families({"primary": primary, **checks}, WHERE))


def _row(table, arm, reference):
    [row] = [r for _, r in table.iterrows() if (r["arm"], r["reference"]) == (arm, reference)]
    return row


def test_a_named_reference_is_its_own_primary_row_in_the_holm_family():
    table = _table([USUAL, NAMED])
    usual, named = _row(table, "x", "baseline"), _row(table, "x", "x_part")
    assert _row(table, "x_part", "baseline")["role"] == SECONDARY  # x_part's own row: not declared
    assert (usual["role"], named["role"]) == (PRIMARY, PRIMARY)
    assert (usual["family_size"], named["family_size"]) == (2, 2)
    assert usual["diff"] == pytest.approx(-0.10) and named["diff"] == pytest.approx(-0.03)
    p_usual = scipy_stats.ttest_rel(X, BASE).pvalue
    p_named = scipy_stats.ttest_rel(X, X_PART).pvalue
    assert p_usual < 0.05 / 2 and 0.05 / 2 < p_named < 0.05  # Holm: the first at alpha/2, then the second at alpha
    assert usual["p_holm"] == pytest.approx(2 * p_usual) and named["p_holm"] == pytest.approx(p_named)
    assert (usual["holm_divisor"], named["holm_divisor"]) == (2, 1)
    for row, other, level in ((usual, BASE, 1 - 0.05 / 2), (named, X_PART, 0.95)):
        d = [a - b for a, b in zip(X, other)]
        sd = scipy_stats.tstd(d)
        low, high = scipy_stats.t.interval(level, 3, loc=sum(d) / 4, scale=sd / 2)
        assert row["ci_level"] == pytest.approx(level)
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
        assert row["verdict"] == REPRODUCED
    # The paper's -0.08 is x against its usual reference: the named comparison has no figure in the paper.
    assert usual["magnitude"] == MAG_CONSISTENT and usual["paper_effect"] == pytest.approx(-0.08)
    assert named["magnitude"] == MAG_UNKNOWN and math.isnan(named["paper_effect"])
    assert audit_table(table) == []


def test_the_usual_row_is_the_same_test_with_or_without_the_named_one():
    alone, beside = _row(_table([USUAL]), "x", "baseline"), _row(_table([USUAL, NAMED]), "x", "baseline")
    assert alone["family_size"] == 1 and beside["family_size"] == 2
    for col in ("n", "diff", "sd_diff", "p_t", "paper_effect", "expect"):
        assert alone[col] == beside[col]
    only_named = _table([NAMED])  # the usual comparison is then secondary, the named one the family of one
    assert _row(only_named, "x", "baseline")["role"] == SECONDARY
    assert _row(only_named, "x", "x_part")[["role", "family_size"]].tolist() == [PRIMARY, 1]


def test_a_named_reference_that_is_the_usual_one_is_the_usual_row():
    table = _table([{"arm": "x", "metric": "val/loss", "reference": "baseline"}])
    assert len(table[table["arm"] == "x"]) == 1 and _row(table, "x", "baseline")["role"] == PRIMARY


def test_confirmatory_seeds_decide_the_named_row_too():
    named = _row(_table([USUAL, NAMED], confirmatory_seeds=[1, 2, 3]), "x", "x_part")
    assert named["n"] == 3 and named["seeds"] == "1,2,3"
    assert named["diff"] == pytest.approx(-0.03 - (-0.01 + 0.02 - 0.02) / 3)


def test_a_reference_the_protocol_does_not_run_is_one_sentence():
    arms = ["baseline", "x", "x_part"]
    validate_against(parse_families({"primary": [USUAL, NAMED]}, WHERE), CLAIM, arms)  # a good one passes
    bad = parse_families({"primary": [{**NAMED, "reference": "x_whole"}]}, WHERE)
    with pytest.raises(ConfigError) as refused:
        validate_against(bad, CLAIM, arms)
    assert str(refused.value) == ("conf/evidence/toy.yaml: check `x` vs `x_whole` on `val/loss` names a reference "
                                  "that is not another arm the protocol runs (it runs baseline, x, x_part).")
    with pytest.raises(ConfigError, match="names a reference that is not another arm"):
        validate_against(parse_families({"primary": [{**NAMED, "reference": "x"}]}, WHERE), CLAIM, arms)
    with pytest.raises(ConfigError, match="'reference' is one cell's name, on an entry that is not 'tuned'"):
        parse_families({"primary": [{**NAMED, "tuned": True}]}, WHERE)


def test_the_hash_keeps_old_declarations_and_sees_a_named_reference():
    # computed by the hash before `reference` existed: a declaration without one must keep it
    old = "69a465bb707a874f7bcdd8001d4f9f9d79f01361ded6112a761a14591898cacf"
    node = {"primary": [USUAL, {"arm": "x@l4", "metric": "val/loss", "tuned": True}], "margins": {"val/loss": 0.01}}
    assert checks_sha256(parse_families(node, "x"), CLAIM, {"declared_seeds": [1]}) == old
    node["primary"].append(NAMED)
    assert checks_sha256(parse_families(node, "x"), CLAIM, {"declared_seeds": [1]}) != old


def test_a_late_entry_flags_its_row_with_or_without_the_usual_reference_spelled_out():
    spelled = {"arm": "x", "metric": "val/loss", "reference": "baseline", "note": "moved after the pilot"}
    for late, flagged in (([spelled], ("x", "baseline")), ([{**NAMED, "note": "moved"}], ("x", "x_part")),
                          ([{**USUAL, "note": "moved"}], ("x", "baseline"))):
        table = _table([USUAL, NAMED], added_after_data=late)
        rows = {(r["arm"], r["reference"]): str(r["added_after_data"]) for _, r in table.iterrows()}
        assert rows[flagged].startswith("moved"), (late, rows)
        assert [k for k, v in rows.items() if v.startswith("moved")] == [flagged]
