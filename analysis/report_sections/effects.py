"""Final metrics: each arm minus its reference, paired by seed, with raw tests (no verdicts)."""

from __future__ import annotations

import math

from analysis import markdown as md
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    effects = ctx.effects
    body = ["Each arm minus its reference on the final value, paired by seed; CI = 95% paired Student-t interval "
            "over seeds; p (t) = paired t-test (raw: not adjusted, this table gives no verdicts); p (sign-flip) = "
            "permutation test (exact when marked). Null results are listed like any other.", ""]
    if effects.empty:
        body.append("_No arm has paired finished seeds with its reference._")
        return Section("Final metrics: arm - reference", body)
    body.append(md.table(effects, [
        ("metric", "metric"), ("better", "better"), ("arm", "arm"), ("reference", "reference"), ("n", "seeds"),
        ("mean_ref", "reference mean"), ("mean_arm", "arm mean"), ("diff", "diff"), ("rel_diff", "relative"),
        ("ci_low", "CI low"), ("ci_high", "CI high"), ("p_t", "p (t)"), ("p_sign_flip", "p (sign-flip)"),
        ("exact", "exact"),
    ], {"diff": md.signed, "ci_low": md.signed, "ci_high": md.signed, "p_t": md.pvalue,
        "p_sign_flip": md.pvalue, "rel_diff": lambda x: f"{x:+.2%}" if isinstance(x, float) and math.isfinite(x) else "–"}))
    return Section("Final metrics: arm - reference", body)
