"""The reader's check over verdict tables (analysis/verdict_audit.py): a hand-made table that breaks each rule
once is caught once, under that rule's name; a clean one and every committed table pass."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from analysis.stats import holm_adjust, sign_flip_p, t_interval, tost_p
from analysis.verdict import (
    CONSISTENT, MAG_OPPOSITE_SIDE, MAG_SMALLER, MAG_UNKNOWN, NO_DETECTABLE, PRIMARY, REPRODUCED, SECONDARY,
    TOO_FEW_SEEDS, NOT_REPRODUCED,
)
from analysis.verdict_audit import ROW_RULES, audit_results, audit_table, main

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _row(arm, diffs, role, verdict, magnitude, divisor=1.0, expect="better", margin=None, paper_effect=math.nan,
         reason="") -> dict:
    d = np.asarray(diffs, dtype=float)
    n, mean, sd = d.size, float(d.mean()), float(d.std(ddof=1))
    level = 1 - (2 if margin else 1) * 0.05 / divisor
    low, high = t_interval(n, mean, sd, level) if n >= 3 else (math.nan, math.nan)
    p_t = float(scipy_stats.ttest_1samp(d, 0).pvalue) if n >= 3 else math.nan
    return {
        "arm": arm, "reference": "base", "metric": "val/loss", "better": "lower", "n": n, "mean_ref": 3.0,
        "diff": mean, "sd_diff": sd, "ci_low": low, "ci_high": high, "ci_level": level, "p_t": p_t,
        "p_sign_flip": sign_flip_p(d)[0] if n >= 3 else math.nan,
        "p_test": (tost_p(n, mean, sd, margin) if margin else p_t) if n >= 3 else math.nan,
        "test": "equivalence (TOST)" if margin else "difference (t)", "margin": margin or math.nan,
        "equivalence_low": -margin if margin else math.nan, "equivalence_high": margin if margin else math.nan,
        "role": role, "expect": expect, "p_holm": math.nan, "family_size": 0,
        "holm_divisor": divisor if role == PRIMARY else math.nan, "paper_effect": paper_effect,
        "verdict": verdict, "magnitude": magnitude, "reason": reason,
    }


def clean_table() -> pd.DataFrame:
    """A primary difference, a primary TOST (one Holm family of 2), a secondary with an exact-test note, and a
    two-seed tuning row: every rule holds."""
    rows = [
        _row("fast", [-0.10, -0.12, -0.11, -0.13, -0.09, -0.115, -0.105, -0.125], PRIMARY, REPRODUCED, MAG_SMALLER,
             divisor=2.0, paper_effect=-0.5),
        _row("same", [0.001, -0.002, 0.0015, -0.001, 0.0005], PRIMARY, REPRODUCED, "-", divisor=2.0, expect="none",
             margin=0.01, reason="TOST against the equivalence bounds [-0.01, +0.01]: ... lies inside them"),
        _row("weak", [-0.02, -0.025, -0.03, -0.022, -0.027], SECONDARY, CONSISTENT, MAG_UNKNOWN,
             reason="...; the exact sign-flip p 0.0625 is not below the row's level 0.05"),
        _row("tuning@lr1e-3", [-0.2, -0.1], SECONDARY, TOO_FEW_SEEDS, "-"),
    ]
    table = pd.DataFrame(rows)
    primary = table["role"] == PRIMARY
    table.loc[primary, "p_holm"] = holm_adjust(table.loc[primary, "p_test"])
    table.loc[primary, "family_size"] = int(primary.sum())
    return table


BREAKS = {
    "interval": lambda t: t.assign(ci_high=t["ci_high"].where(t.index != 0, t.loc[0, "ci_high"] + 0.01)),
    "direction": lambda t: t.assign(verdict=t["verdict"].where(t.index != 2, NO_DETECTABLE)),
    "few seeds": lambda t: t.assign(p_t=t["p_t"].where(t.index != 3, 1e-14)),
    "noise": lambda t: t.assign(diff=t["diff"].where(t.index != 3, 2.78e-17)),
    "magnitude": lambda t: t.assign(paper_effect=t["paper_effect"].where(t.index != 0, 0.5)),
    "cannot tell": lambda t: t.assign(magnitude=t["magnitude"].where(t.index != 2, "cannot tell")),
    "TOST": lambda t: t.assign(equivalence_low=math.nan, equivalence_high=math.nan),
    "exact": lambda t: t.assign(reason=t["reason"].where(t.index != 2, "")),
    "Holm": lambda t: t.assign(p_holm=t["p_holm"].where(t.index != 0, t.loc[0, "p_test"])),  # the raw p
}


def test_a_clean_table_has_no_finding():
    assert audit_table(clean_table()) == []


def test_every_row_rule_is_exercised():
    assert set(ROW_RULES) | {"Holm"} == set(BREAKS)


@pytest.mark.parametrize("rule", list(BREAKS))
def test_each_broken_rule_is_caught_once_under_its_name(rule):
    found = audit_table(BREAKS[rule](clean_table()))
    assert [f.rule for f in found] == [rule], [f.line() for f in found]


def test_a_primary_with_no_p_counts_in_the_family():
    table = clean_table()
    missing = _row("never", [0.1, 0.2, 0.3], PRIMARY, "did not reach", "-")
    missing.update(ci_low=math.nan, ci_high=math.nan, p_t=math.nan, p_sign_flip=math.nan, p_test=math.nan,
                   family_size=2)
    table = pd.concat([table, pd.DataFrame([missing])], ignore_index=True)
    found = audit_table(table)  # the family left it out: its size, and the Holm p of the others, are wrong
    assert found[0].text == "judged in families of 2" and {f.rule for f in found} == {"Holm"} and len(found) == 3
    primary = table["role"] == PRIMARY
    ps = [p if math.isfinite(p) else 1.0 for p in table.loc[primary, "p_test"]]
    table.loc[primary, "family_size"] = 3
    table.loc[primary, "p_holm"] = [a if math.isfinite(p) else math.nan
                                    for a, p in zip(holm_adjust(ps), table.loc[primary, "p_test"])]
    assert audit_table(table) == []


def test_the_opposite_side_is_not_smaller():
    table = clean_table()
    table.loc[0, "magnitude"] = MAG_OPPOSITE_SIDE
    table.loc[0, "paper_effect"] = 0.5
    assert audit_table(table) == []


def test_an_equivalence_row_at_the_wrong_level_is_caught():
    table = clean_table()
    table.loc[1, "verdict"] = NOT_REPRODUCED
    table.loc[1, "ci_level"] = 0.90
    assert [f.rule for f in audit_table(table)] == ["interval", "TOST"]


@pytest.mark.parametrize("paper", ["mols", "pc_layer", "small_init", "wd_plasticity", "wisca"])
def test_no_committed_verdict_table_trips_a_reader(paper):
    found = audit_results(RESULTS)[paper]
    assert not found, "\n".join(f.line(paper) for f in found)


def test_the_cli_says_nothing_found_or_lists_findings(tmp_path, capsys):
    assert main([f"results={RESULTS}"]) == 0 and "nothing found" in capsys.readouterr().out
    (tmp_path / "toy").mkdir()
    BREAKS["noise"](clean_table()).to_csv(tmp_path / "toy" / "verdicts.csv", index=False)
    assert main([f"results={tmp_path}"]) == 1 and "[noise]" in capsys.readouterr().out
    assert main([f"results={tmp_path / 'none'}"]) == 2
