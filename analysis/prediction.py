"""Does the ladder predict? Each primary trend fitted on every rung but the largest, tested on the largest.

    table = prediction_table(verdicts)      # -> results/<paper>/prediction.csv beside trend.csv

For every primary (check, arm family) with at least MIN_RUNGS usable rungs (analysis/trend_report.py's points:
`@x<factor>` rungs at their reference's logged size, ladder rungs `@l<depth>` at the ladder's declared size, so
the ladder's l2, l3, l4 predict l6):
- a *backtest*: the weighted line of analysis/trend.py fitted on all rungs but the largest, its prediction at the
  largest rung with a 95% prediction interval (the line's uncertainty there on t_{k-2}, plus the largest rung's own
  SE), the measured effect there and whether it fell inside (`covered`); beside it how many smaller rungs put the
  effect on the same side of 0 as the largest (the ranking question OLMo's ladder and DataDecide ask: does the
  small scale say which way the large one goes?);
- *extrapolations*: the line fitted on every rung, carried to each GPU recipe's size (conf/recipe/, 124M to 1B
  non-embedding parameters) with its 95% interval, labelled as extrapolations. They are usually far too wide to
  use: that width is the honest answer of a ladder this small.
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pandas as pd

from analysis import markdown as md
from analysis.rungs import rung_of
from analysis.scale import count
from analysis.sections import Section
from analysis.trend import fit_trend
from analysis.trend_report import claimed_sign, trend_points
from analysis.verdict import MIN_SEEDS

MIN_RUNGS = 4
PREDICTION_FILE = "prediction.csv"
BACKTEST, EXTRAPOLATION = "backtest", "extrapolation"
COLUMNS = ["check", "arm_family", "kind", "rung", "params_non_embedding", "predicted", "pi_low", "pi_high",
           "measured", "covered", "fitted_on", "same_side_as_largest"]


@lru_cache(maxsize=1)
def recipe_sizes() -> tuple[tuple[str, float], ...]:
    """(recipe, non-embedding parameters) of each GPU recipe whose model config shares its name, smallest first.
    Counted from the config's shape (analysis never imports the model; a test checks the count against it)."""
    from omegaconf import OmegaConf

    from lit_modules.config import files

    sizes = []
    for recipe in files.options("recipe"):
        if files.has_option("model", recipe):
            sizes.append((recipe, float(non_embedding_params(OmegaConf.load(files.option_path("model", recipe))))))
    return tuple(sorted(sizes, key=lambda s: s[1]))


def non_embedding_params(model) -> int:
    """A dense Llama block's parameters x layers + the final norm: q, o (d x d), k, v (d x kv_heads x head_dim),
    SwiGLU (3 x d x d_ff), two norms (d each); embedding and head left out."""
    d, layers, heads = int(model.d_model), int(model.n_layers), int(model.n_heads)
    kv = int(model.get("n_kv_heads") or heads) * (d // heads)
    return layers * (2 * d * d + 2 * d * kv + 3 * d * int(model.d_ff) + 2 * d) + d


def _usable(points: pd.DataFrame) -> pd.DataFrame:
    """The rungs with a size (a point off a ladder family's ladder has none) and an effect with an SE."""
    n = points["n"].astype(float)
    ok = (n >= MIN_SEEDS) & points["diff"].map(math.isfinite) & points["sd_diff"].map(math.isfinite) \
        & (points["sd_diff"] > 0) & points["params_non_embedding"].map(math.isfinite)
    used = points[ok].copy()
    used["se"] = used["sd_diff"] / used["n"].astype(float).map(math.sqrt)
    return used


def _rung(arm: str) -> str:
    return rung_of(arm) or "base"


def prediction_table(verdicts: pd.DataFrame, extrapolate_to: tuple[tuple[str, float], ...] | None = None) -> pd.DataFrame:
    """Backtest and extrapolation rows for every primary trend with MIN_RUNGS usable rungs (empty otherwise)."""
    rows = []
    for (family, metric), points in trend_points(verdicts).items():
        used = _usable(points)
        if len(used) < MIN_RUNGS:
            continue
        claimed = claimed_sign(points.iloc[0]["expect"], points.iloc[0]["better"])
        fit_rows, largest = used.iloc[:-1], used.iloc[-1]
        line = fit_trend(list(fit_rows["params_non_embedding"]), list(fit_rows["diff"]), list(fit_rows["se"]),
                         claimed).line
        predicted, low, high = line.predict(largest["params_non_embedding"], own_se=largest["se"])
        side = math.copysign(1.0, largest["diff"])
        agree = sum(math.copysign(1.0, d) == side for d in fit_rows["diff"])
        base = {"check": metric, "arm_family": family}
        rows.append({**base, "kind": BACKTEST, "rung": _rung(largest["arm"]),
                     "params_non_embedding": largest["params_non_embedding"], "predicted": predicted, "pi_low": low,
                     "pi_high": high, "measured": largest["diff"], "covered": bool(low <= largest["diff"] <= high),
                     "fitted_on": ", ".join(_rung(a) for a in fit_rows["arm"]),
                     "same_side_as_largest": f"{agree} of {len(fit_rows)}"})
        whole = fit_trend(list(used["params_non_embedding"]), list(used["diff"]), list(used["se"]), claimed).line
        for recipe, size in (recipe_sizes() if extrapolate_to is None else extrapolate_to):
            predicted, low, high = whole.predict(size)
            rows.append({**base, "kind": EXTRAPOLATION, "rung": recipe, "params_non_embedding": size,
                         "predicted": predicted, "pi_low": low, "pi_high": high, "measured": math.nan,
                         "covered": "", "fitted_on": ", ".join(_rung(a) for a in used["arm"]),
                         "same_side_as_largest": ""})
    return pd.DataFrame(rows, columns=COLUMNS)


def write_prediction(verdicts: pd.DataFrame, out: Path) -> pd.DataFrame:
    """prediction.csv beside the report when a primary trend has MIN_RUNGS rungs; no file otherwise."""
    table = prediction_table(verdicts)
    path = Path(out) / PREDICTION_FILE
    if table.empty:
        path.unlink(missing_ok=True)
    else:
        table.to_csv(path, index=False)
    return table


def prediction_section(verdicts: pd.DataFrame, out: Path) -> Section:
    """The report's backtest and extrapolations (empty, and no file, without a MIN_RUNGS-rung primary trend)."""
    table = write_prediction(verdicts, out)
    if table.empty:
        return Section("Does the ladder predict?", [])
    body = [
        (f"Each primary check measured at {MIN_RUNGS} or more rungs: the line of the trend section fitted on every "
         "rung but the largest predicts the largest, with a 95% prediction interval (the line's uncertainty there "
         "on t_{k-2} plus that rung's own SE); *covered* says whether the measurement fell inside. *Same side*: "
         "how many smaller rungs put the effect on the largest rung's side of 0. The extrapolations carry the line "
         "fitted on every rung to the GPU recipes' sizes: extrapolations far beyond the ladder, with their 95% "
         f"intervals, however wide (`{PREDICTION_FILE}`)."), "",
        md.table(table, [("check", "check"), ("arm_family", "arm"), ("kind", "kind"), ("rung", "rung / recipe"),
                         ("params_non_embedding", "non-embedding"), ("predicted", "predicted"), ("pi_low", "low"),
                         ("pi_high", "high"), ("measured", "measured"), ("covered", "covered"),
                         ("same_side_as_largest", "same side")],
                 {"params_non_embedding": count, "predicted": md.signed, "pi_low": md.signed,
                  "pi_high": md.signed, "measured": md.signed}),
    ]
    return Section("Does the ladder predict?", body)
