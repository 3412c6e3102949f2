"""The report's trend over model sizes: each primary check's effect at every rung, a line against ln N.

    rungs = rungs_table(ab)                # one row per rung: its reference's size, tokens and TPP
    trends = trend_table(verdicts)         # one row per primary (check, arm family) measured at >= 2 rungs
    section = trend_section(ab, verdicts, out)   # writes rungs.csv and trend.csv beside report.md

A rung is a model size: the arms without a variant and those with an `@x<factor>` variant (`@x4`, `@x0.25`);
other variants (`@gqa`, `@lr3e-3`) are other conditions, not sizes. A check's points are the verdict rows of
its arm family at each rung (primary or not: the 4x rung's rows are secondary, the trend is the primary
check's), so they carry the very differences, seeds and reference sizes the verdicts show. The fit and its
words are analysis/trend.py's. (`scale.csv` is the per-arm scale table; `rungs.csv` lists the sizes once.)
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from analysis import markdown as md
from analysis.ablation import Ablation, scale_of
from analysis.claims import join_arm, split_arm
from analysis.scale import count, number
from analysis.sections import Section, first_value
from analysis.trend import INTERVAL_TEXT, fit_trend
from analysis.verdict import MIN_SEEDS, PRIMARY

RUNG_VARIANT = re.compile(r"x\d+(?:\.\d+)?")
TREND_FILE, RUNGS_FILE = "trend.csv", "rungs.csv"


def is_rung(variant: str) -> bool:
    """The base size (no variant; `-` in the tables) or an `x<factor>` size variant."""
    return variant in ("", "-") or bool(RUNG_VARIANT.fullmatch(variant))


def rungs_table(ab: Ablation) -> pd.DataFrame:
    """Per rung, smallest first: its reference arm's median size and budget over its finished runs."""
    family = split_arm(ab.baseline)[0]
    rows = []
    for variant in (v for v in ab.variants() if is_rung(v)):
        arms = [a for a in ab.arms if split_arm(a)[1] == variant]
        reference = join_arm(family, variant)
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


def trend_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per primary (check, arm family) with verdict rows at two or more rungs."""
    if verdicts.empty:
        return pd.DataFrame()
    at_rungs = verdicts[verdicts["variant"].map(is_rung)]
    at_rungs = at_rungs.assign(family=at_rungs["arm"].map(lambda a: split_arm(a)[0]))
    keys = dict.fromkeys(zip(at_rungs.loc[at_rungs["role"] == PRIMARY, "family"],
                             at_rungs.loc[at_rungs["role"] == PRIMARY, "metric"]))
    rows = []
    for family, metric in keys:
        points = at_rungs[(at_rungs["family"] == family) & (at_rungs["metric"] == metric)].drop_duplicates("arm")
        if len(points) < 2:
            continue
        points = points.sort_values("params_non_embedding", kind="stable")
        n = points["n"].astype(float)
        usable = (n >= MIN_SEEDS) & points["diff"].map(math.isfinite) & points["sd_diff"].map(math.isfinite)
        ses = [sd / math.sqrt(k) if ok else math.nan for sd, k, ok in zip(points["sd_diff"], n, usable)]
        first = points.iloc[0]
        trend = fit_trend(list(points["params_non_embedding"]), list(points["diff"]), ses,
                          claimed_sign(first["expect"], first["better"]))
        rows.append({
            "check": metric, "arm_family": family, "reference_family": split_arm(first["reference"])[0],
            "slope": trend.slope, "low": trend.low, "high": trend.high, "statement": trend.statement,
            "direction": trend.direction, "rungs_measured": len(points), "rungs_fitted": trend.rungs,
            "inflation": trend.inflation if math.isfinite(trend.slope) else math.nan,
            "rungs": "; ".join(_point_text(p, se) for (_, p), se in zip(points.iterrows(), ses)),
            "interval": INTERVAL_TEXT if math.isfinite(trend.slope) else "",
        })
    return pd.DataFrame(rows)


def _point_text(row: pd.Series, se: float) -> str:
    where = f"{split_arm(row['arm'])[1] or 'base'} (N={count(row['params_non_embedding'])})"
    if not math.isfinite(se):
        return f"{where}: not used ({int(row['n'])} seeds; a rung needs {MIN_SEEDS} with a finite difference)"
    return f"{where}: {row['diff']:+.4g} ± {se:.2g} SE ({int(row['n'])} seeds)"


def trend_section(ab: Ablation, verdicts: pd.DataFrame, out: Path) -> Section:
    """Drawn where a primary check was measured at two or more rungs; writes rungs.csv and trend.csv."""
    trends = trend_table(verdicts)
    if trends.empty:
        return Section("Trend with scale", [])
    rungs = rungs_table(ab)
    rungs.to_csv(Path(out) / RUNGS_FILE, index=False)
    trends.to_csv(Path(out) / TREND_FILE, index=False)
    body = [
        ("Each primary check measured at two or more model sizes (rungs: the base arm and its `@x<factor>` "
         "variants): its effect at each rung (mean paired difference arm - reference, SE = sd / sqrt(n), a rung "
         f"used from {MIN_SEEDS} seeds) fitted against ln N, N = the reference's non-embedding parameters, by "
         f"weighted least squares (weights 1 / SE^2); slope per unit of ln N, {INTERVAL_TEXT}. The SEs come "
         "from a few seeds each, so the interval is approximate. *Grows* / *shrinks*: the interval excludes 0 and "
         "|effect| rises / falls with N along the line; *changes sign*: the line crosses 0 between the rungs; two "
         "rungs give no trend (a line always fits two points)."), "",
        md.table(rungs, [("rung", "rung"), ("model", "model"), ("reference", "reference"),
                         ("params_non_embedding", "non-embedding"), ("params_total", "parameters"),
                         ("tokens", "tokens"), ("tpp", "TPP")],
                 {"params_non_embedding": count, "params_total": count, "tokens": count, "tpp": number}), "",
        md.table(trends, [("check", "check"), ("arm_family", "arm"), ("reference_family", "reference"),
                          ("slope", "slope per ln N"), ("low", "low"), ("high", "high"),
                          ("statement", "trend"), ("direction", "direction"), ("rungs", "effect per rung")],
                 {"slope": md.signed, "low": md.signed, "high": md.signed}),
    ]
    return Section("Trend with scale", body)
