"""Calibration: does the rule call effects where none exists, and find the harm it was handed?

A protocol declares its controls (`checks.controls`, analysis/families.py); each is compared with its reference
at every rung both ran (the arms' size variants: `baseline_init1@x4` against `baseline@x4`), paired by seed, on a
95% paired t interval (the level a lone primary check is judged at):
- a *null control* differs from its reference only in a nuisance that cannot move the result (`init.stream=1`:
  another draw of the initial weights, the same data order): an interval that excludes 0 is a false positive,
  which the rule should make in about 5% of null controls;
- a *positive control* carries a planted harm of known sign (the reference's tuned rate divided by 4): it must be
  detected, its interval wholly on the harmful side, at every rung.
`calibration_lines` sums them over every protocol for the ledger's first section, the false positives with an
exact (Clopper-Pearson) binomial interval.
"""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats as scipy_stats

from analysis.ablation import Ablation, better_direction
from analysis.claims import join_arm, split_arm
from analysis.comparisons import compare, comparison_row
from analysis.families import Families
from analysis.verdict import ALPHA, EXACT_NOTE_MAX_SEEDS, MIN_SEEDS

NULL_ROLE, POSITIVE_ROLE = "null_control", "positive_control"
EFFECT_CALLED, NO_EFFECT_CALLED = "effect called (a false positive)", "no effect called"
DETECTED, NOT_DETECTED, WRONG_SIDE = "detected", "not detected", "detected on the wrong side"
TOO_FEW = "too few seeds"
LEVEL = 1 - ALPHA


def control_rows(ab: Ablation, families: Families) -> list[dict]:
    """One row per (declared control, rung where the control and its reference both ran)."""
    rows = []
    for control in families.controls:
        for arm in ab.arms:
            family, variant = split_arm(arm)
            reference = join_arm(control.reference, variant)
            if family != control.arm or reference not in ab.arms:
                continue
            c, noise = compare(ab, arm, reference, control.metric)
            better = better_direction(control.metric)
            row = comparison_row(arm, reference, control.metric, better, c, noise)
            low, high = c.t_interval(LEVEL) if c.n >= MIN_SEEDS else (math.nan, math.nan)
            harm = 1.0 if better == "lower" else -1.0  # the sign of arm - reference a harm has
            if c.n < MIN_SEEDS:
                verdict, why = TOO_FEW, f"{c.n} paired seed(s); a control needs {MIN_SEEDS}"
            elif control.kind == "null":
                called = low > 0 or high < 0
                verdict = EFFECT_CALLED if called else NO_EFFECT_CALLED
                why = f"95% interval [{low:+.4g}, {high:+.4g}] {'excludes' if called else 'contains'} 0"
            else:
                detected = low > 0 if harm > 0 else high < 0
                wrong = high < 0 if harm > 0 else low > 0
                verdict = DETECTED if detected else WRONG_SIDE if wrong else NOT_DETECTED
                why = f"95% interval [{low:+.4g}, {high:+.4g}] against a planted harm of sign {harm:+.0f}"
            if c.n >= MIN_SEEDS and c.n <= EXACT_NOTE_MAX_SEEDS and ((low > 0 or high < 0) != (c.p_sign_flip < ALPHA)):
                why += f"; the exact sign-flip p {c.p_sign_flip:.3g} disagrees with the t interval at {ALPHA:g}"
            row.update({"ci_low": low, "ci_high": high, "ci_level": LEVEL if c.n >= MIN_SEEDS else math.nan,
                        "role": NULL_ROLE if control.kind == "null" else POSITIVE_ROLE, "variant": variant or "-",
                        "expect": "-", "test": "difference (t)", "p_test": c.p_t if c.n >= MIN_SEEDS else math.nan,
                        "verdict": verdict, "magnitude": "-", "reason": why, "short": verdict, "selection": "",
                        "added_after_data": "", "paper": f"{control.kind} control"})
            if c.n < MIN_SEEDS:
                row.update({"p_t": math.nan, "p_sign_flip": math.nan})
            rows.append(row)
    return rows


def calibration_lines(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The ledger's calibration paragraph over every protocol's control rows (per paper folder name)."""
    rows = pd.concat([t.assign(paper=p) for p, t in tables.items() if not t.empty], ignore_index=True) \
        if any(not t.empty for t in tables.values()) else pd.DataFrame(columns=["role", "verdict"])
    nulls = rows[(rows["role"] == NULL_ROLE) & (rows["verdict"] != TOO_FEW)]
    positives = rows[(rows["role"] == POSITIVE_ROLE) & (rows["verdict"] != TOO_FEW)]
    if nulls.empty and positives.empty:
        return ["No null or positive control has been judged yet (none is declared in `checks.controls`, or their "
                "cells have not run): the rule's false-positive rate on a true null and its power on a known harm "
                "are not measured."]
    lines = []
    if not nulls.empty:
        k, n = int((nulls["verdict"] == EFFECT_CALLED).sum()), len(nulls)
        low, high = clopper_pearson(k, n)
        lines.append(f"- Null controls: the rule called an effect in **{k} of {n}** ({k / n:.1%}; 95% interval "
                     f"[{low:.1%}, {high:.1%}], exact binomial), where {ALPHA:.0%} is expected.")
    if not positives.empty:
        missed = positives[positives["verdict"] != DETECTED]
        lines.append(f"- Positive controls: **{len(positives) - len(missed)} of {len(positives)} detected**"
                     + ("." if missed.empty else "; not: " + ", ".join(
                         f"`{r['paper']}` `{r['arm']}` ({r['verdict']})" for _, r in missed.iterrows()) + "."))
    return lines


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of k successes in n trials."""
    tail = (1 - level) / 2
    low = 0.0 if k == 0 else float(scipy_stats.beta.ppf(tail, k, n - k + 1))
    high = 1.0 if k == n else float(scipy_stats.beta.ppf(1 - tail, k + 1, n - k))
    return low, high
