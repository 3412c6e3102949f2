"""The report's trend over model sizes: each primary check's effect at every rung, a line against ln N.

    trends = trend_table(verdicts)         # one row per primary (check, arm family) measured at >= 2 rungs
    rungs = rungs_table(ab, references)    # one row per rung the trends use: its reference's size, tokens, TPP
    section = trend_section(ab, verdicts, out)   # writes rungs.csv and trend.csv beside report.md

A rung is a model size: an arm's trailing `@x<factor>` variant (`@x4`, `@x0.25`), or none for the base size.
What comes before it is the arm's trend family, the condition the size varies under: `g8_qk_vo_tensor@x4` is
`g8_qk_vo_tensor` at 4x, `g8_qk_vo_tensor@tpp1.3@x4` is `g8_qk_vo_tensor@tpp1.3` (the paper's 1.3 tokens per
parameter) at 4x. An LR point (`@lr3e-3`, `@x4@lr3e-3`) is a tuning condition of its own, never a size of a
primary check. A check's points are the verdict rows of its trend family at each rung (primary or not: the 4x
rung's rows are secondary, the trend is the primary check's), so they carry the very differences, seeds and
reference sizes the verdicts show. The fit and its words are analysis/trend.py's. (`scale.csv` is the
per-arm scale table; `rungs.csv` lists each rung the trends use once.)
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from analysis import markdown as md
from analysis.ablation import Ablation, scale_of
from analysis.claims import VARIANT_SEP, split_arm
from analysis.scale import count, number
from analysis.sections import Section, first_value
from analysis.trend import INTERVAL_TEXT, POOLED_TEXT, fit_trend, pooled_effect
from analysis.verdict import MIN_SEEDS, PRIMARY

RUNG_VARIANT = re.compile(r"x\d+(?:\.\d+)?")
TREND_FILE, RUNGS_FILE = "trend.csv", "rungs.csv"


def trend_family(arm: str) -> str:
    """The arm without its trailing size variant: `g8_qk_vo_tensor@tpp1.3@x4` -> `g8_qk_vo_tensor@tpp1.3`."""
    head, sep, last = str(arm).rpartition(VARIANT_SEP)
    return head if sep and RUNG_VARIANT.fullmatch(last) else str(arm)


def rungs_table(ab: Ablation, references: dict[str, str]) -> pd.DataFrame:
    """Per rung (variant -> the trend's reference arm there), smallest first: the reference's median size and
    budget over its finished runs (all the variant's arms where the reference has none)."""
    rows = []
    for variant, reference in references.items():
        arms = [a for a in ab.arms if split_arm(a)[1] == variant]
        s = scale_of(ab, [reference] if reference in arms else arms)
        model = first_value(ab.finished[ab.finished["arm"].isin(arms)], "params.model.name")
        rows.append({"rung": variant or "-", "model": model, "reference": reference,
                     "params_non_embedding": s.params_non_embedding, "params_total": s.params_total,
                     "tokens": s.tokens, "tpp": s.tpp, "arms": len(arms)})
    frame = pd.DataFrame(rows)
    return frame.sort_values("params_non_embedding", kind="stable").reset_index(drop=True) if rows else frame


def claimed_sign(expect: str, better: str) -> int:
    """The sign of arm - reference the paper claims: -1 for an improvement on a lower-is-better metric."""
    towards_better = -1 if better == "lower" else 1
    return {"better": towards_better, "worse": -towards_better}.get(expect, 0)


def trend_points(verdicts: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """Per primary (arm family, check), its verdict rows at every rung of that family, smallest first."""
    if verdicts.empty:
        return {}
    rows = verdicts.assign(family=verdicts["arm"].map(trend_family))
    primary = rows[rows["role"] == PRIMARY]
    return {(family, metric): rows[(rows["family"] == family) & (rows["metric"] == metric)]
            .drop_duplicates("arm").sort_values("params_non_embedding", kind="stable")
            for family, metric in dict.fromkeys(zip(primary["family"], primary["metric"]))}


def trend_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per primary (check, arm family) with verdict rows at two or more rungs."""
    rows = []
    for (family, metric), points in trend_points(verdicts).items():
        if len(points) < 2:
            continue
        n = points["n"].astype(float)
        usable = (n >= MIN_SEEDS) & points["diff"].map(math.isfinite) & points["sd_diff"].map(math.isfinite)
        ses = [sd / math.sqrt(k) if ok else math.nan for sd, k, ok in zip(points["sd_diff"], n, usable)]
        first = points.iloc[0]
        sizes, effects = list(points["params_non_embedding"]), list(points["diff"])
        claimed = claimed_sign(first["expect"], first["better"])
        trend = fit_trend(sizes, effects, ses, claimed)
        pooled = pooled_effect(sizes, effects, ses)
        rows.append({
            "check": metric, "arm_family": family, "reference_family": trend_family(first["reference"]),
            "slope": trend.slope, "low": trend.low, "high": trend.high, "statement": trend.statement,
            "direction": trend.direction, "rungs_measured": len(points), "rungs_fitted": trend.rungs,
            "inflation": trend.inflation if math.isfinite(trend.slope) else math.nan,
            "rungs": "; ".join(_point_text(p, se) for (_, p), se in zip(points.iterrows(), ses)),
            "interval": INTERVAL_TEXT if math.isfinite(trend.slope) else "",
            "pooled_effect": pooled.effect, "pooled_low": pooled.low, "pooled_high": pooled.high,
            "tau2": pooled.tau2, "pooled_statement": pooled_statement(pooled.low, pooled.high, pooled.rungs, claimed),
        })
    return pd.DataFrame(rows)


def pooled_statement(low: float, high: float, rungs: int, claimed: int) -> str:
    """What the rungs say together, from the pooled interval alone."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"not pooled ({rungs} usable rung{'s' if rungs != 1 else ''}; pooling needs 2)"
    if low <= 0 <= high:
        return f"pooled over {rungs} rungs: no detectable effect"
    if claimed == 0:
        return f"pooled over {rungs} rungs: an effect where the paper claims none"
    side = "the claimed" if (high < 0) == (claimed < 0) else "the opposite"
    return f"pooled over {rungs} rungs: on {side} side of 0"


def _point_text(row: pd.Series, se: float) -> str:
    size = row["arm"][len(trend_family(row["arm"])) + 1:]
    where = f"{size or 'base'} (N={count(row['params_non_embedding'])})"
    if not math.isfinite(se):
        if int(row["n"]) >= MIN_SEEDS and not math.isfinite(row["diff"]):  # e.g. a speed-up: the arm never got there
            return f"{where}: not used (no finite difference on {int(row['n'])} seeds: {row.get('verdict', '')})"
        return f"{where}: not used ({int(row['n'])} seeds; a rung needs {MIN_SEEDS} with a finite difference)"
    return f"{where}: {row['diff']:+.4g} ± {se:.2g} SE ({int(row['n'])} seeds)"


def trend_section(ab: Ablation, verdicts: pd.DataFrame, out: Path) -> Section:
    """Drawn where a primary check was measured at two or more rungs; writes rungs.csv and trend.csv."""
    trends = trend_table(verdicts)
    if trends.empty:
        return Section("Trend with scale", [])
    fitted = set(zip(trends["arm_family"], trends["check"]))
    references = {}  # each rung a trend uses, with that trend's reference arm there (the first trend's)
    for key, points in trend_points(verdicts).items():
        if key in fitted:
            for arm, reference in zip(points["arm"], points["reference"]):
                references.setdefault(split_arm(arm)[1], reference)
    rungs = rungs_table(ab, references)
    rungs.to_csv(Path(out) / RUNGS_FILE, index=False)
    trends.to_csv(Path(out) / TREND_FILE, index=False)
    body = [
        ("Each primary check measured at two or more model sizes (rungs: the arm and its `@x<factor>` "
         "variants; an arm under a condition, `arm@tpp1.3`, has rungs `arm@tpp1.3@x<factor>`): its effect at "
         "each rung (mean paired difference arm - reference, SE = sd / sqrt(n), a rung "
         f"used from {MIN_SEEDS} seeds) fitted against ln N, N = the reference's non-embedding parameters, by "
         f"weighted least squares (weights 1 / SE^2); slope per unit of ln N, {INTERVAL_TEXT}. *Grows* / "
         "*shrinks*: the interval excludes 0 and |effect| rises / falls with N along the line; *changes sign*: the "
         "line crosses 0 between the rungs; two rungs give no trend (a line always fits two points). *Pooled*: "
         f"the {POOLED_TEXT}, what the rungs say together."), "",
        md.table(rungs, [("rung", "rung"), ("model", "model"), ("reference", "reference"),
                         ("params_non_embedding", "non-embedding"), ("params_total", "parameters"),
                         ("tokens", "tokens"), ("tpp", "TPP")],
                 {"params_non_embedding": count, "params_total": count, "tokens": count, "tpp": number}), "",
        md.table(trends, [("check", "check"), ("arm_family", "arm"), ("reference_family", "reference"),
                          ("slope", "slope per ln N"), ("low", "low"), ("high", "high"),
                          ("statement", "trend"), ("direction", "direction"), ("pooled_effect", "pooled"),
                          ("pooled_low", "low"), ("pooled_high", "high"), ("pooled_statement", "the rungs together"),
                          ("rungs", "effect per rung")],
                 {"slope": md.signed, "low": md.signed, "high": md.signed, "pooled_effect": md.signed,
                  "pooled_low": md.signed, "pooled_high": md.signed}),
    ]
    return Section("Trend with scale", body)
