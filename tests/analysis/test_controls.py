"""Calibration controls (analysis/controls.py): a null control's false positive and a positive control's
detection, at every rung both arms ran, and the ledger's count with its exact binomial interval."""

import pandas as pd
import pytest

from analysis.controls import (DETECTED, EFFECT_CALLED, NO_EFFECT_CALLED, NOT_DETECTED, NULL_ROLE, POSITIVE_ROLE,
                               calibration_lines, clopper_pearson, control_rows)
from analysis.families import Control, Families, parse_families
from analysis.verdict_audit import audit_table
from analysis.verdict_table import verdicts_table
from lit_modules.config.errors import ConfigError
from tests.helpers.handmade_ablation import handmade, toy_claim

BASE = [3.0, 3.02, 2.98, 3.01, 2.99, 3.03]
NUISANCE = [0.004, -0.003, 0.001, -0.002, 0.003, -0.004]
FAMILIES = Families(controls=(Control("base_init1", "baseline", "val/loss", "null"),
                              Control("base_slow", "baseline", "val/loss", "positive")))


def _ablation(harm=0.2, drift=0.0):
    values = {}
    for v in ("", "@x4"):
        values[f"baseline{v}"] = BASE
        values[f"base_init1{v}"] = [b + e + drift for b, e in zip(BASE, NUISANCE)]
        values[f"base_slow{v}"] = [b + harm + e for b, e in zip(BASE, NUISANCE)]
    return handmade(values, params={"x4": 400_000})


def test_each_control_is_judged_at_every_rung():
    rows = pd.DataFrame(control_rows(_ablation(), FAMILIES))
    assert list(zip(rows["arm"], rows["role"], rows["verdict"])) == [
        ("base_init1", NULL_ROLE, NO_EFFECT_CALLED), ("base_init1@x4", NULL_ROLE, NO_EFFECT_CALLED),
        ("base_slow", POSITIVE_ROLE, DETECTED), ("base_slow@x4", POSITIVE_ROLE, DETECTED)]
    assert (rows["ci_level"] == 0.95).all() and (rows["reference"].str.startswith("baseline")).all()


def test_a_null_control_with_a_shift_is_a_false_positive_and_a_harm_too_small_is_missed():
    rows = pd.DataFrame(control_rows(_ablation(harm=0.001, drift=0.05), FAMILIES))
    assert set(rows.loc[rows["role"] == NULL_ROLE, "verdict"]) == {EFFECT_CALLED}
    assert set(rows.loc[rows["role"] == POSITIVE_ROLE, "verdict"]) == {NOT_DETECTED}


def test_the_verdict_table_carries_the_controls_and_the_audit_reads_them():
    table = verdicts_table(_ablation(), toy_claim(), FAMILIES)
    assert set(table["role"]) >= {NULL_ROLE, POSITIVE_ROLE}
    assert audit_table(table) == []


def test_the_ledger_counts_false_positives_with_an_exact_interval():
    table = pd.DataFrame(control_rows(_ablation(), FAMILIES))
    lines = calibration_lines({"toy": table, "other": pd.DataFrame(control_rows(_ablation(0.001, 0.05), FAMILIES))})
    low, high = clopper_pearson(2, 4)
    assert lines[0] == (f"- Null controls: the rule called an effect in **2 of 4** (50.0%; 95% interval "
                        f"[{low:.1%}, {high:.1%}], exact binomial), where 5% is expected.")
    assert lines[1].startswith("- Positive controls: **2 of 4 detected**; not: `other` `base_slow` (not detected)")
    assert calibration_lines({})[0].startswith("No null or positive control has been judged yet")


def test_clopper_pearson_on_known_answers():
    assert clopper_pearson(0, 10) == pytest.approx((0.0, 0.3084971), abs=1e-6)  # 1 - 0.025 ** (1/10)
    assert clopper_pearson(5, 5)[1] == 1.0 and clopper_pearson(5, 5)[0] == pytest.approx(0.025 ** (1 / 5))


def test_a_malformed_control_is_one_sentence():
    with pytest.raises(ConfigError, match="every checks.controls entry names an 'arm', its 'reference'"):
        parse_families({"controls": [{"arm": "a", "reference": "b", "metric": "val/loss", "kind": "maybe"}]}, "x")


def test_a_protocol_kept_out_of_the_ledger_still_counts_its_controls(tmp_path):
    from analysis.ledger import render_ledger
    from analysis.provenance import write_provenance
    from analysis.results_data import write_results_data

    values = {"adamw_baseline": BASE, "adamw_pc4": [b - 0.1 for b in BASE],
              "base_init1": [b + e for b, e in zip(BASE, NUISANCE)], "base_slow": [b + 0.2 for b in BASE]}
    ab = handmade(values, name="evidence/pc_layer", claim="pc_layer", baseline="adamw_baseline", tokens=144_000)
    folder = tmp_path / "results" / "pc_layer"
    write_results_data(ab, folder)
    from tests.analysis.test_ledger import RECORD

    write_provenance(folder, {**RECORD, "checks": {
        "primary": [{"arm": "adamw_pc4", "metric": "val/loss"}],
        "controls": [{"arm": "base_init1", "reference": "adamw_baseline", "metric": "val/loss", "kind": "null"},
                     {"arm": "base_slow", "reference": "adamw_baseline", "metric": "val/loss", "kind": "positive"}]}})
    text = render_ledger(folder.parent, tmp_path / "RESULTS.md")
    assert "(`pc_layer/`): `adamw_pc4` on `val/loss`: below its regime" in text  # kept out: 1.44 TPP
    assert "the rule called an effect in **0 of 1**" in text and "**1 of 1 detected**" in text
    assert "From an earlier revision of `conf/evidence/pc_layer.yaml`" in text.split("## Not in the ledger")[1]
