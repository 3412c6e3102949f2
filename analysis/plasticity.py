"""Weight decay vs plasticity: the table of base loss against fine-tuning gain, from an `Ablation`.

    tables = plasticity_tables(ab)              # one per fine-tuning recipe the grid's bases went through
    text = render(ab.name, tables[0])           # Markdown; `write_outputs` adds summary.csv and runs.csv

The table reads only the store-free representation reports render from (analysis.ablation.Ablation): the
grid's finished runs, their train/loss curves and their fine-tune runs. So `sweeps.plasticity` (from the
MLflow store) and `make report FROM=results/wd_plasticity` (from exported CSVs) show the same table.

Per run: its base val/loss, the fine-tune's target loss before and after and their difference (plasticity),
its top-1 target accuracy after, the rate it was fine-tuned at (one per recipe, or each arm's own where a
protocol tuned it; tuning bases `<arm>@ft_tuning` are no rows),
the train-validation gap (final val/loss minus the mean of the last TRAIN_TAIL logged train/loss values, one
micro-batch each), the attention pseudo-ranks, the linear-probe accuracy and, when the fine-tune's eval asked
for them (eval.sampled), its sampled-generation metrics (greedy Pass@1, Pass@k, Maj@k:
`sampled_<task>_<metric>`); per (regime, lambda): mean +/- sd over seeds, and per regime whether the lambda
with the best base loss is the one with the most
plasticity (and, with the per-run rows, whether both differences are significant paired by seed).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.ablation import TRAIN_TAIL, Ablation
from analysis.claims import is_finetune_tuning_base
from analysis.comparisons import final_train_loss
from analysis.stats import compare_paired
from lit_modules.runs import tags

PSEUDO_RANK = "diag/attention_rank/{kind}/pseudo_rank_tau0.01"
PROBE_BEST = "eval/probe/best_acc"
PROBE_LAYER = re.compile(r"metrics\.eval/probe/layer_(\d+)/acc")
# The fine-tune's sampled-generation metrics (lit_modules/evaluation/sampled.py), when its eval asked for them.
SAMPLED = re.compile(r"metrics\.eval/(\w+)/(greedy_pass_at_1|pass_at_\d+|maj_at_\d+)")
# (column, header): the per-run quantities the table shows (summary.csv also has per-layer probe accuracy).
QUANTITIES = [
    ("base_val_loss", "base val/loss"),
    ("target_before", "target loss before"),
    ("target_after", "target loss after"),
    ("target_acc_after", "target top-1 acc after"),
    ("finetune_lr", "ft lr"),
    ("plasticity", "plasticity (before - after)"),
    ("train_val_gap", "train-val gap"),
    ("qk_pseudo_rank", "QK pseudo-rank (tau 0.01)"),
    ("ov_pseudo_rank", "OV pseudo-rank (tau 0.01)"),
    ("probe_best_acc", "probe acc (best layer)"),
]


@dataclass(frozen=True)
class Recipe:
    """A fine-tuning recipe as its runs recorded it (tags and params of the fine-tune runs)."""

    name: str
    hash: str
    data: str
    lr: float
    weight_decay: float
    steps: int | None
    batch_size: int | None
    schedule: str | None

    def describe(self) -> str:
        steps = f"{self.steps} steps" if self.steps is not None else "? steps"
        batch = f" x batch {self.batch_size}" if self.batch_size is not None else ""
        schedule = f", {self.schedule} schedule" if self.schedule else ""
        lr = f"lr {self.lr:g}" if math.isfinite(self.lr) else "lr per arm (tuned on tuning seeds; column ft lr)"
        return (f"Fine-tuning recipe `{self.name}`: target `{self.data}`, {lr}, weight decay "
                f"{self.weight_decay:g}, {steps}{batch}{schedule}.")


@dataclass(frozen=True)
class PlasticityTable:
    recipe: Recipe
    rows: pd.DataFrame  # one row per base run
    summary: pd.DataFrame  # one row per (regime, weight decay)


def recipes(ab: Ablation) -> list[Recipe]:
    """The recipes of the FINISHED fine-tunes of the grid's runs, newest first (by their newest run)."""
    ft = _finished_finetunes(ab)
    if ft.empty:
        return []
    out = []
    for recipe_hash, group in ft.sort_values("start_time", ascending=False, kind="stable").groupby(
            "recipe_key", sort=False):
        newest = group.iloc[0]
        rates = sorted({_float(v) for v in group.get("params.optim.lr", pd.Series(dtype=str))})
        out.append(Recipe(
            name=str(newest.get(f"tags.{tags.FINETUNE_RECIPE}", "?")), hash=str(recipe_hash),
            data=str(newest.get(f"tags.{tags.FINETUNE_TARGET_DATA}", "?")),
            lr=rates[0] if len(rates) == 1 else math.nan, weight_decay=_float(newest.get("params.optim.weight_decay")),
            steps=_int(newest.get("params.trainer.max_steps")), batch_size=_int(newest.get("params.data.batch_size")),
            schedule=_text(newest.get("params.schedule.name")),
        ))
    return out


def plasticity_tables(ab: Ablation, recipe_hash: str | None = None) -> list[PlasticityTable]:
    """One table per recipe (only `recipe_hash`'s when given, even if no fine-tune of it finished yet): its
    family (`recipe_family`, the settings but the rate) where its runs record one, else its hash."""
    found = recipes(ab)
    if recipe_hash is not None:
        found = [r for r in found if r.hash == recipe_hash] or [Recipe("?", recipe_hash, "?", math.nan, math.nan,
                                                                      None, None, None)]
    tables = []
    for recipe in found:
        rows = plasticity_rows(ab, recipe.hash)
        tables.append(PlasticityTable(recipe, rows, summarize(rows)))
    return tables


def plasticity_rows(ab: Ablation, recipe_hash: str) -> pd.DataFrame:
    """One row per finished base run: its identity, its and its fine-tune's numbers, per-layer probe accuracy."""
    ft = _finished_finetunes(ab)
    if not ft.empty:
        ft = ft[ft["recipe_key"] == recipe_hash].sort_values("start_time", kind="stable")
    newest = {r[f"tags.{tags.FINETUNE_BASE}"]: r for _, r in ft.iterrows()} if not ft.empty else {}
    layers = sorted((c for c in ab.finished.columns if PROBE_LAYER.fullmatch(c)),
                    key=lambda c: int(PROBE_LAYER.fullmatch(c).group(1)))
    rows = []
    for _, base in ab.finished[~ab.finished["arm"].map(is_finetune_tuning_base)].iterrows():
        tuned = newest.get(base["run_id"])
        row = {
            "run_id": base["run_id"],
            "finetune_run_id": tuned["run_id"] if tuned is not None else "",
            "arm": base["arm"],
            "regime": _text(base.get("params.regime.name")) or "",
            "weight_decay": _float(base.get("params.optim.weight_decay")),
            "seed": base["seed"],
            "tokens": _float(base.get("params.budget.total_tokens")),
            "base_val_loss": _metric(base, "val/loss"),
            "target_before": _metric(tuned, tags.TARGET_LOSS_BEFORE),
            "target_after": _metric(tuned, tags.TARGET_LOSS_AFTER),
            "target_acc_after": _metric(tuned, tags.TARGET_ACC_AFTER),
            "finetune_lr": _float(tuned.get("params.optim.lr")) if tuned is not None else math.nan,
            "plasticity": _metric(tuned, tags.PLASTICITY),
            "train_val_gap": _metric(base, "val/loss") - final_train_loss(ab, base["run_id"]),
            "qk_pseudo_rank": _metric(base, PSEUDO_RANK.format(kind="qk")),
            "ov_pseudo_rank": _metric(base, PSEUDO_RANK.format(kind="ov")),
            "probe_best_acc": _metric(base, PROBE_BEST),
        }
        for col in layers:
            if pd.notna(base[col]):
                row[f"probe_layer_{PROBE_LAYER.fullmatch(col).group(1)}_acc"] = float(base[col])
        for col, value in (tuned.items() if tuned is not None else ()):
            found = SAMPLED.fullmatch(str(col))
            if found and pd.notna(value):
                row[f"sampled_{found.group(1)}_{found.group(2)}"] = float(value)
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else [
        "run_id", "finetune_run_id", "arm", "regime", "weight_decay", "seed", "tokens", *(c for c, _ in QUANTITIES)])


def _finished_finetunes(ab: Ablation) -> pd.DataFrame:
    ft = ab.finetunes
    needed = (f"tags.{tags.FINETUNE_BASE}", f"tags.{tags.FINETUNE_RECIPE_HASH}", "status")
    if ft.empty or not all(c in ft for c in needed):
        return pd.DataFrame()
    ft = ft[ft["status"] == "FINISHED"]
    # One table per recipe; a recipe whose rate was tuned per arm is one family (older runs: one hash each).
    family = f"tags.{tags.FINETUNE_RECIPE_FAMILY}"
    key = ft[family].where(ft[family].notna() & (ft[family] != "") & (ft[family] != "nan"), ft[f"tags.{tags.FINETUNE_RECIPE_HASH}"]) \
        if family in ft else ft[f"tags.{tags.FINETUNE_RECIPE_HASH}"]
    return ft.assign(recipe_key=key.astype(str))


def _metric(row: pd.Series | None, key: str) -> float:
    value = row.get(f"metrics.{key}") if row is not None else None
    return float(value) if value is not None and pd.notna(value) else float("nan")


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _int(value) -> int | None:
    number = _float(value)
    return int(number) if math.isfinite(number) else None


def _text(value) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) or value in ("", "None") \
        else str(value)


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (regime, weight_decay): n, and per quantity mean, sample sd (NaN for n = 1), min and max."""
    columns = [c for c, _ in QUANTITIES] + sorted(c for c in rows.columns if c.startswith(("probe_layer_", "sampled_")))
    out = []
    for (regime, wd), group in rows.groupby(["regime", "weight_decay"], sort=True):
        entry = {"regime": regime, "weight_decay": wd, "n_seeds": len(group),
                 "tokens": float(group["tokens"].median())}
        for col in columns:
            values = group[col].dropna().to_numpy(dtype=float) if col in group else np.array([])  # older rows
            entry[f"{col}_mean"] = float(values.mean()) if len(values) else float("nan")
            entry[f"{col}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else float("nan")
            entry[f"{col}_min"] = float(values.min()) if len(values) else float("nan")
            entry[f"{col}_max"] = float(values.max()) if len(values) else float("nan")
        out.append(entry)
    return pd.DataFrame(out)


def _ranges_overlap(summary: pd.DataFrame, a: int, b: int, col: str) -> bool:
    lo_a, hi_a = summary.at[a, f"{col}_min"], summary.at[a, f"{col}_max"]
    lo_b, hi_b = summary.at[b, f"{col}_min"], summary.at[b, f"{col}_max"]
    return not (hi_a < lo_b or hi_b < lo_a)


# What "the most plastic lambda" means: the largest gain, and (the paper's post-SFT score) the lowest loss after.
DOWNSTREAM = (("plasticity", "max", "the most plasticity (before - after)"),
              ("target_after", "min", "the lowest target loss after fine-tuning"))


def _regime_statement(regime: str, group: pd.DataFrame, col: str, direction: str, label: str,
                      rows: pd.DataFrame | None = None) -> str:
    group = group.dropna(subset=["base_val_loss_mean", f"{col}_mean"])
    if len(group) < 2:
        return f"- {regime}: fewer than two lambdas with both a base loss and {label}; no comparison."
    best_base = group["base_val_loss_mean"].idxmin()
    best_down = group[f"{col}_mean"].idxmax() if direction == "max" else group[f"{col}_mean"].idxmin()
    lam_base, lam_down = group.at[best_base, "weight_decay"], group.at[best_down, "weight_decay"]
    if best_base == best_down:
        n = int(group["n_seeds"].min())
        return (f"- {regime}: the same lambda ({lam_base:g}) gives the lowest base val/loss and {label} "
                f"(means over {n}{'+' if n > 1 else ''} seed(s) per lambda): no decoupling seen.")
    n = int(min(group.at[best_base, "n_seeds"], group.at[best_down, "n_seeds"]))
    d_loss = group.at[best_down, "base_val_loss_mean"] - group.at[best_base, "base_val_loss_mean"]
    d_down = group.at[best_down, f"{col}_mean"] - group.at[best_base, f"{col}_mean"]
    text = (f"- {regime}: lambda {lam_base:g} has the lowest base val/loss, lambda {lam_down:g} {label}: they "
            f"DIFFER on the means. From {lam_base:g} to {lam_down:g}: base loss {d_loss:+.4f}, {col} "
            f"{d_down:+.4f} (nats/token)")
    if n < 2:
        return text + "; one seed per cell, so the seed spread is unknown: not evidence either way."
    sd = {lam: (group.at[i, "base_val_loss_sd"], group.at[i, f"{col}_sd"])
          for lam, i in ((lam_base, best_base), (lam_down, best_down))}
    text += f"; seed sd (base loss, {col}): " + "; ".join(
        f"lambda {lam:g}: {a:.4f}, {b:.4f}" for lam, (a, b) in sd.items()) + f"; n = {n} seeds. "
    overlap = (_ranges_overlap(group, best_base, best_down, "base_val_loss")
               or _ranges_overlap(group, best_base, best_down, col))
    if overlap:
        text += "The seed ranges overlap, so this ordering is within seed noise: not evidence of decoupling."
    else:
        text += ("The seed ranges of both quantities do not overlap, consistent with the paper's decoupling "
                 "at this scale (a small-n observation).")
    if rows is not None:
        text += " " + _paired_sentence(rows[rows["regime"] == regime], lam_base, lam_down, col)
    return text


def _paired_sentence(rows: pd.DataFrame, lam_base: float, lam_down: float, col: str) -> str:
    """Both differences (lambda_down - lambda_base) paired by seed: seeds share data order and init."""
    def by_seed(lam: float, quantity: str) -> dict[str, float]:
        cell = rows[rows["weight_decay"] == lam]
        return dict(zip(cell["seed"].astype(str), cell[quantity].astype(float)))

    parts, significant = [], []
    for quantity in ("base_val_loss", col):
        c = compare_paired(by_seed(lam_down, quantity), by_seed(lam_base, quantity))
        if c.n < 2:
            return f"Paired by seed: only {c.n} seed(s) in both cells, no paired test."
        parts.append(f"{quantity} {c.mean_diff:+.4f} (95% paired t interval [{c.ci_low:+.4f}, {c.ci_high:+.4f}], "
                     f"paired t p = {c.p_t:.3g})")
        significant.append(c.p_t < 0.05 and c.ci_excludes_zero())
    verdict = ("both differences are significant (p < 0.05, CI excluding 0): decoupling at this scale"
               if all(significant) else "not both significant (p < 0.05 with a CI excluding 0): no evidence of "
               "decoupling at this scale")
    return f"Paired by seed (n = {c.n}), lambda {lam_down:g} - lambda {lam_base:g}: {'; '.join(parts)}; {verdict}."


def decoupling(summary: pd.DataFrame, rows: pd.DataFrame | None = None) -> list[str]:
    """Per regime and downstream measure: does argmin base loss differ from the best-downstream lambda, is
    that beyond the seed spread (min-max ranges disjoint), and, given the per-run rows, is each difference
    significant paired by seed?"""
    return [_regime_statement(regime, group, col, direction, label, rows)
            for regime, group in summary.groupby("regime", sort=True)
            for col, direction, label in DOWNSTREAM]


def _cell(mean: float, sd: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.4f} ± {sd:.4f}" if math.isfinite(sd) else f"{mean:.4f}"


def table_lines(table: PlasticityTable, notes: list[str] = (), heading: str = "##") -> list[str]:
    """The table, its explanation and the decoupling statements, as Markdown lines (no title); `heading`
    marks the decoupling subsection (one level below the caller's own)."""
    summary, rows = table.summary, table.rows
    headers = ["regime", "lambda", "seeds", "tokens", *(h for _, h in QUANTITIES)]
    lines = [
        table.recipe.describe(),
        "Losses in nats/token on held-out splits: base val/loss on the pre-training corpus; target loss on "
        "the fine-tuning corpus, before (base weights) and after fine-tuning. Plasticity = before - after. "
        f"Train-val gap = base val/loss - mean of the last {TRAIN_TAIL} logged train/loss values. Pseudo-rank: "
        "mean over heads and layers of #{sigma_i >= 0.01 sigma_1} (max = head_dim). "
        "Cells: mean ± sample sd over seeds (sd omitted for one seed).",
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    for _, r in summary.iterrows():
        cells = [str(r["regime"]), f"{r['weight_decay']:g}", str(int(r["n_seeds"])), f"{r['tokens']:,.0f}"]
        cells += [_cell(r[f"{c}_mean"], r[f"{c}_sd"]) for c, _ in QUANTITIES]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{heading} Is the best-loss lambda the most plastic one?", "", *decoupling(summary, rows), ""]
    missing = rows[rows["finetune_run_id"] == ""] if not rows.empty else rows
    if len(missing):
        cells = ", ".join(missing["arm"] + "/" + missing["seed"])
        lines.append(f"- {len(missing)} base run(s) have no finished fine-tune: {cells}.")
    lines += [f"- {note}" for note in notes]
    return lines


def render(name: str, table: PlasticityTable, notes: list[str] = ()) -> str:
    return "\n".join([f"# {name}: weight decay vs plasticity", "", *table_lines(table, notes)]) + "\n"


def write_outputs(out: Path, text: str, summary: pd.DataFrame, rows: pd.DataFrame) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(text)
    summary.to_csv(out / "summary.csv", index=False)
    rows.to_csv(out / "runs.csv", index=False)
    return out / "table.md"


