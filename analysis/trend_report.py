"""The report's trend over model sizes: each primary check's effect at every rung, a line against ln N.

    trends = trend_table(verdicts)         # one row per primary (check, arm family) measured at >= 2 rungs
    rungs = rungs_table(ab, references)    # one row per rung the trends use: its reference's size, tokens, TPP
    section = trend_section(ab, verdicts, out)   # writes rungs.csv and trend.csv beside report.md

A rung is a model size (analysis/rungs.py): an arm's trailing `@x<factor>` variant (`@x4`, `@x0.25`), or none
for the base size, N the reference's logged non-embedding parameters; or a rung of the model ladder, `@l<depth>`
(`@l2` ... `@l6`), N the ladder's declared count. What comes before it is the arm's trend family, the condition
the size varies under: `g8_qk_vo_tensor@x4` is `g8_qk_vo_tensor` at 4x, `g8_origin@tpp1.3@l6` is
`g8_origin@tpp1.3` (the paper's 1.3 tokens per parameter) at rung l6. A family with ladder rungs is fitted over
those alone: its plain arm (or an `@x` rung) stays in the rung list, not used, with why (LADDER_ONLY). An LR
point (`@lr3e-3`, `@x4@lr3e-3`) is a tuning condition of its own, never a size of a primary check. A check's
points are the verdict rows of its trend family at each rung (primary or not: the 4x rung's rows are secondary,
the trend is the primary check's), so they carry the very differences, seeds and reference sizes the verdicts
show. The fit and its words are analysis/trend.py's. (`scale.csv` is the
per-arm scale table; `rungs.csv` lists each rung the trends use once.)
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analysis import markdown as md
from analysis.ablation import Ablation, scale_of
from analysis.claims import split_arm
from analysis.rungs import is_ladder_arm, ladder_rung, model_shape, rung_of, trend_family
from analysis.scale import count, number
from analysis.sections import Section, first_value
from analysis.trend import INTERVAL_TEXT, POOLED_TEXT, fit_trend, pooled_effect
from analysis.verdict import MIN_SEEDS, PRIMARY

TREND_FILE, RUNGS_FILE = "trend.csv", "rungs.csv"
# Why a family with ladder rungs leaves its other points out: its N is the declared rung count, and the export
# keeps a run's model name only (params.model.name, not its layers or width), while the logged count is the arm's
# own (a gate, GQA) - no point off the ladder can be put on the same ln N axis honestly.
LADDER_ONLY = ("not a rung of the ladder: this family's N is the ladder's declared size, and runs.csv keeps the "
               "model's name, not its shape, so name the cell `@l<depth>`")  # no ';': it parts the rungs text


def rungs_table(ab: Ablation, references: dict[str, str]) -> pd.DataFrame:
    """Per rung (variant -> the trend's reference arm there), smallest first: its size (a ladder rung's from the
    declaration, an `@x` rung's from its reference's logged runs, with the layers and width of the model option
    they ran) and the reference's median budget over its finished runs (all the variant's arms where it has none)."""
    rows = []
    for variant, reference in references.items():
        arms = [a for a in ab.arms if split_arm(a)[1] == variant]
        s = scale_of(ab, [reference] if reference in arms else arms)
        model = first_value(ab.finished[ab.finished["arm"].isin(arms)], "params.model.name")
        rung = ladder_rung(rung_of(reference))
        if rung is not None:  # the declared size; TPP on it, as ladder_tokens drew the budget
            size, (layers, width) = float(rung.params_non_embedding), (rung.n_layers, rung.d_model)
            tpp = s.tokens / size
        else:
            size, (layers, width), tpp = s.params_non_embedding, model_shape(model), s.tpp
        rows.append({"rung": variant or "-", "model": model, "reference": reference,
                     "params_non_embedding": size, "n_layers": layers, "d_model": width,
                     "params_total": s.params_total, "tokens": s.tokens, "tpp": tpp, "arms": len(arms)})
    frame = pd.DataFrame(rows)
    if not rows:
        return frame
    frame = frame.astype({"n_layers": "Int64", "d_model": "Int64"})  # whole numbers, blank where unknown
    return frame.sort_values("params_non_embedding", kind="stable").reset_index(drop=True)


def claimed_sign(expect: str, better: str) -> int:
    """The sign of arm - reference the paper claims: -1 for an improvement on a lower-is-better metric."""
    towards_better = -1 if better == "lower" else 1
    return {"better": towards_better, "worse": -towards_better}.get(expect, 0)


def trend_points(verdicts: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    """Per primary (arm family, check), its verdict rows at every rung of that family, smallest first; a ladder
    rung's `params_non_embedding` is the declared one, and a point beside ladder rungs but off the ladder has
    none (NaN, sorted last) and a `size_note`."""
    if verdicts.empty:
        return {}
    rows = verdicts.assign(family=verdicts["arm"].map(trend_family), size_note="",
                           params_non_embedding=verdicts["params_non_embedding"].astype(float))
    ladder = rows["arm"].map(is_ladder_arm)
    off = rows["family"].isin(set(rows.loc[ladder, "family"])) & ~ladder  # beside ladder rungs, off the ladder
    rows.loc[ladder, "params_non_embedding"] = [float(ladder_rung(rung_of(a)).params_non_embedding)
                                                for a in rows.loc[ladder, "arm"]]
    rows.loc[off, "params_non_embedding"] = math.nan
    rows.loc[off, "size_note"] = LADDER_ONLY
    primary = rows[rows["role"] == PRIMARY]
    return {(family, metric): rows[(rows["family"] == family) & (rows["metric"] == metric)]
            .drop_duplicates("arm").sort_values("params_non_embedding", kind="stable")
            for family, metric in dict.fromkeys(zip(primary["family"], primary["metric"]))}


def trend_table(verdicts: pd.DataFrame) -> pd.DataFrame:
    """One row per primary (check, arm family) with verdict rows at two or more rungs."""
    rows = []
    for (family, metric), points in trend_points(verdicts).items():
        sized = points[points["size_note"] == ""]
        if len(sized) < 2:
            continue
        n = sized["n"].astype(float)
        usable = (n >= MIN_SEEDS) & sized["diff"].map(math.isfinite) & sized["sd_diff"].map(math.isfinite)
        ses = [sd / math.sqrt(k) if ok else math.nan for sd, k, ok in zip(sized["sd_diff"], n, usable)]
        first = sized.iloc[0]
        sizes, effects = list(sized["params_non_embedding"]), list(sized["diff"])
        claimed = claimed_sign(first["expect"], first["better"])
        trend = fit_trend(sizes, effects, ses, claimed)
        pooled = pooled_effect(sizes, effects, ses)
        rows.append({
            "check": metric, "arm_family": family, "reference_family": trend_family(first["reference"]),
            "slope": trend.slope, "low": trend.low, "high": trend.high, "statement": trend.statement,
            "direction": trend.direction, "rungs_measured": len(sized), "rungs_fitted": trend.rungs,
            "inflation": trend.inflation if math.isfinite(trend.slope) else math.nan,
            "rungs": "; ".join([_point_text(p, se) for (_, p), se in zip(sized.iterrows(), ses)]
                               + [_point_text(p, math.nan) for _, p in points[points["size_note"] != ""].iterrows()]),
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
    size = rung_of(row["arm"])
    if row.get("size_note"):
        return f"{size or 'base'}: not used ({row['size_note']})"
    where = f"{size or 'base'} (N={count(row['params_non_embedding'])})"
    if not math.isfinite(se):
        if int(row["n"]) >= MIN_SEEDS and not math.isfinite(row["diff"]):  # e.g. a speed-up: the arm never got there
            return f"{where}: not used (no finite difference on {int(row['n'])} seeds: {row.get('verdict', '')})"
        return f"{where}: not used ({int(row['n'])} seeds; a rung needs {MIN_SEEDS} with a finite difference)"
    return f"{where}: {row['diff']:+.4g} ± {se:.2g} SE ({int(row['n'])} seeds)"


def _whole(value: object) -> str:
    return "–" if pd.isna(value) else str(int(value))


def trend_section(ab: Ablation, verdicts: pd.DataFrame, out: Path) -> Section:
    """Drawn where a primary check was measured at two or more rungs; writes rungs.csv and trend.csv."""
    trends = trend_table(verdicts)
    if trends.empty:
        return Section("Trend with scale", [])
    fitted = set(zip(trends["arm_family"], trends["check"]))
    references = {}  # each rung a trend uses, with that trend's reference arm there (the first trend's)
    for key, points in trend_points(verdicts).items():
        if key in fitted:
            sized = points[points["size_note"] == ""]
            for arm, reference in zip(sized["arm"], sized["reference"]):
                references.setdefault(split_arm(arm)[1], reference)
    rungs = rungs_table(ab, references)
    rungs.to_csv(Path(out) / RUNGS_FILE, index=False)
    trends.to_csv(Path(out) / TREND_FILE, index=False)
    body = [
        ("Each primary check measured at two or more model sizes (rungs: the arm and its `@x<factor>` "
         "variants, or its ladder rungs `@l<depth>`; an arm under a condition, `arm@tpp1.3`, has rungs "
         "`arm@tpp1.3@x<factor>` / `arm@tpp1.3@l<depth>`): its effect at each rung (mean paired difference "
         f"arm - reference, SE = sd / sqrt(n), a rung used from {MIN_SEEDS} seeds) fitted against ln N, N = the "
         "reference's non-embedding parameters (a ladder rung's: the ladder's declared count; beside ladder "
         "rungs a point off the ladder is not used), by "
         f"weighted least squares (weights 1 / SE^2); slope per unit of ln N, {INTERVAL_TEXT}. *Grows* / "
         "*shrinks*: the interval excludes 0 and |effect| rises / falls with N along the line; *changes sign*: the "
         "line crosses 0 between the rungs; two rungs give no trend (a line always fits two points). *Pooled*: "
         f"the {POOLED_TEXT}, what the rungs say together."), "",
        md.table(rungs, [("rung", "rung"), ("model", "model"), ("reference", "reference"),
                         ("params_non_embedding", "non-embedding"), ("n_layers", "layers"),
                         ("d_model", "d_model"), ("params_total", "parameters"),
                         ("tokens", "tokens"), ("tpp", "TPP")],
                 {"params_non_embedding": count, "params_total": count, "tokens": count, "tpp": number,
                  "n_layers": _whole, "d_model": _whole}), "",
        md.table(trends, [("check", "check"), ("arm_family", "arm"), ("reference_family", "reference"),
                          ("slope", "slope per ln N"), ("low", "low"), ("high", "high"),
                          ("statement", "trend"), ("direction", "direction"), ("pooled_effect", "pooled"),
                          ("pooled_low", "low"), ("pooled_high", "high"), ("pooled_statement", "the rungs together"),
                          ("rungs", "effect per rung")],
                 {"slope": md.signed, "low": md.signed, "high": md.signed, "pooled_effect": md.signed,
                  "pooled_low": md.signed, "pooled_high": md.signed}),
    ]
    return Section("Trend with scale", body)
