"""Declared report figures: the kinds a technique's report.yaml (`figures:`) and CORE_FIGURES name.

A technique declares its figures as data (lit_modules/techniques/<name>/report.yaml): a file name, a
caption and one of FIGURE_KINDS with its panels and titles. No figure here knows a technique; each draws
only when its data exists, else returns None (the drawing conventions are analysis/plots.py's).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.ablation import Ablation, run_value
from analysis.claims import split_arm
from analysis.load_runs import numeric
from analysis.plots import (
    TOKENS_LABEL, arm_colors, arm_label, draw_bands, figure_legend, grid_shape, mean_and_range, new_figure,
    save_figure, too_few_seeds,
)
from analysis.verdict import MIN_SEEDS


# ---------------------------------------------------------------------------------------- generic trajectories


def _aggregate(curves: pd.DataFrame, pattern: str, new_key: str) -> pd.DataFrame:
    """Mean over every key matching `pattern`, per run and step (e.g. a statistic averaged over layers)."""
    rows = curves[curves["key"].map(lambda k: fnmatch.fnmatchcase(k, pattern))]
    if rows.empty:
        return rows
    agg = rows.groupby(["run_id", "step", "tokens_seen"], dropna=False)["value"].mean().reset_index()
    agg["key"] = new_key
    return agg


def plot_trajectories(ab: Ablation, panels: dict[str, str], path: Path, title: str, ylabel: str,
                      logy: bool = False) -> Path | None:
    """One subplot per panel: `panels` maps a subplot title to a metric key or a pattern (mean over matches)."""
    shown = {}
    for name, pattern in panels.items():
        frame = _aggregate(ab.curves, pattern, name) if any(ch in pattern for ch in "*?[") else \
            ab.curves[ab.curves["key"] == pattern].assign(key=name)
        if not frame.empty:
            shown[name] = frame
    if not shown:
        return None
    nrows, ncols = grid_shape(len(shown))
    fig, axes = new_figure(nrows, ncols, width=5.0, height=3.8)
    for ax, (name, frame) in zip(axes.flat, shown.items()):
        draw_bands(ax, ab, frame, name)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(TOKENS_LABEL, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if logy:
            ax.set_yscale("log")
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    figure_legend(fig, axes.flat)  # one for all panels: every panel draws the same arms
    fig.suptitle(f"{ab.name}: {title}\n(line = mean over seeds, band = min-max)", fontsize=10)
    return save_figure(fig, path)


def _keys(ab: Ablation, prefix: str) -> list[str]:
    if ab.curves.empty:
        return []
    return sorted(k for k in ab.curves["key"].unique() if k.startswith(prefix))


# ---------------------------------------------------------------------------------------- declared figures
# A technique declares its figures as data (lit_modules/techniques/<name>/report.yaml, `figures:`): a file
# name, a caption and one of these kinds with its panels and titles. The core figures are declared the same
# way (CORE_FIGURES). No figure here knows a technique.


def trajectory_panels(ab: Ablation, panels: list[dict]) -> dict[str, str]:
    """Panel title -> metric key or pattern, from declared panels:
    `{key, title}`, `{pattern, title}` (mean over matching keys), `{each: prefix, title: "... {name}"}` (one
    panel per logged key under the prefix, `name` = its last part), `{each_stat: prefix, pattern: "..{name}",
    title: "..{name}"}` (one panel per distinct last part under the prefix, averaged over `pattern`)."""
    out: dict[str, str] = {}
    for panel in panels:
        if "each" in panel:
            for key in _keys(ab, panel["each"]):
                out[panel["title"].format(name=key.rsplit("/", 1)[-1])] = key
        elif "each_stat" in panel:
            for stat in sorted({k.rsplit("/", 1)[-1] for k in _keys(ab, panel["each_stat"])}):
                out[panel["title"].format(name=stat)] = panel["pattern"].format(name=stat)
        else:
            out[panel["title"]] = panel.get("key") or panel["pattern"]
    return out


def plot_declared_trajectories(ab: Ablation, spec: dict, path: Path) -> Path | None:
    return plot_trajectories(ab, trajectory_panels(ab, spec["panels"]), path, spec["title"], spec["ylabel"],
                             logy=bool(spec.get("logy", False)))


def plot_final_bars(ab: Ablation, spec: dict, path: Path) -> Path | None:
    """Final metrics under a prefix, one bar per last key part and arm (mean over seeds, whisker = min-max);
    one subplot per declared panel `{prefix, ylabel, logy}` and variant (each arm beside its own variant's
    arms only; a family keeps its colour), in a grid; arms without any value are left out."""
    panels = []
    for panel in spec["panels"]:
        cols = sorted(c for c in ab.finished.columns if c.startswith(f"metrics.{panel['prefix']}"))
        if cols:
            panels.append((cols, panel))
    if not panels:
        return None
    first = panels[0][0]
    arms = [a for a in ab.arms if not ab.finished[ab.finished["arm"] == a][first].isna().all().all()]
    variants = list(dict.fromkeys(split_arm(a)[1] for a in arms)) or [""]
    families = list(dict.fromkeys(split_arm(a)[0] for a in arms))
    colors = {a: f"C{families.index(split_arm(a)[0]) % 10}" for a in arms}
    facets = [(cols, panel, variant) for cols, panel in panels for variant in variants]
    groups = max(len(cols) for cols, _ in panels)
    per_facet = max([sum(split_arm(a)[1] == v for a in arms) for v in variants] + [1])
    nrows, ncols = grid_shape(len(facets))
    fig, axes = new_figure(nrows, ncols, width=min(7.0, max(4.0, 0.12 * groups * per_facet + 2.5)), height=3.2)
    for ax, (cols, panel, variant) in zip(axes.flat, facets):
        shown = [a for a in arms if split_arm(a)[1] == variant]
        _bars(ax, ab, shown, cols, colors)
        ax.set_xlabel(spec.get("xlabel", ""), fontsize=8)
        ax.set_ylabel(panel.get("ylabel", ""), fontsize=8)
        if panel.get("logy"):
            ax.set_yscale("log")
        seeds = "/".join(str(len(ab.run_ids(a))) for a in shown)  # in the legend's order
        ax.set_title(f"{variant or '(no variant)'} ({seeds} seeds)", fontsize=9)
    for ax in list(axes.flat)[len(facets):]:
        ax.set_visible(False)
    figure_legend(fig, axes.flat)
    fig.suptitle(f"{ab.name}: {spec['title']}\n(bar = mean over seeds, whisker = min-max)", fontsize=10)
    return save_figure(fig, path)


def _bars(ax, ab: Ablation, arms: list[str], cols: list[str], colors: dict[str, str]) -> None:
    """One group of bars per metric in `cols`, one bar per arm (labelled by its family)."""
    names = [c.rsplit("/", 1)[-1] for c in cols]
    x = np.arange(len(names))
    width = 0.8 / max(1, len(arms))
    unwhiskered = []
    for i, arm in enumerate(arms):
        mean, whiskers = mean_and_range(ab.finished[ab.finished["arm"] == arm][cols].to_numpy(dtype=float))
        ax.bar(x + i * width, mean, width, yerr=whiskers, capsize=2, color=colors[arm], label=split_arm(arm)[0])
        if whiskers is None:
            unwhiskered.append(arm)
    too_few_seeds(ax, unwhiskered)
    ax.set_xticks(x + width * (len(arms) - 1) / 2, names, fontsize=8)


def plot_declared_init_std(ab: Ablation, spec: dict, path: Path) -> Path | None:
    return plot_init_std(ab, path)


_LAYER = re.compile(r"layers\.\d+\.")
# Where a run's initial stds are: params (lit_modules.tracking.init_stds), or step-0 metrics in runs
# recorded (and results exported) before they moved.
INIT_STD_COLUMNS = ("params.init_std.", "metrics.init/std/")


def _mean_of_present(values: np.ndarray) -> float:
    """Mean of the non-NaN values; NaN, without numpy's empty-slice warning, when an arm lacks the matrix
    (an ungated arm has no attention gate)."""
    present = values[~np.isnan(values)]
    return float(present.mean()) if present.size else float("nan")


def plot_init_std(ab: Ablation, path: Path) -> Path | None:
    """The measured std of every weight kind at step 0 (mean over layers and seeds), per arm."""
    prefix = next((p for p in INIT_STD_COLUMNS if any(c.startswith(p) for c in ab.finished.columns)), None)
    if prefix is None:
        return None
    cols = sorted(c for c in ab.finished.columns if c.startswith(prefix))
    kinds: dict[str, list[str]] = {}
    for c in cols:
        kinds.setdefault(_LAYER.sub("", c[len(prefix):]).replace(".weight", ""), []).append(c)
    names = list(kinds)
    fig, axes = new_figure(1, 1, width=max(7.0, 0.8 * len(names)))
    ax = axes[0][0]
    colors = arm_colors(ab.arms)
    offset = 0.6 / max(1, len(ab.arms))
    x = np.arange(len(names))
    values = []
    for i, arm in enumerate(ab.arms):
        rows = ab.finished[ab.finished["arm"] == arm]
        if rows.empty:
            continue
        mean = [_mean_of_present(rows[kinds[n]].apply(numeric).to_numpy(dtype=float)) for n in names]
        values += mean
        # Points, not bars: a bar's length means nothing on a log axis.
        ax.plot(x - 0.3 + (i + 0.5) * offset, mean, "o", color=colors[arm], label=arm_label(ab, arm))
    finite = [v for v in values if np.isfinite(v) and v > 0]
    if finite and max(finite) / min(finite) > 10:
        ax.set_yscale("log")
        ax.set_ylabel("standard deviation at step 0 (log scale)")
    else:
        ax.set_ylabel("standard deviation at step 0")
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=7)
    ax.set_xlabel("weight matrix (mean over layers)")
    ax.set_title(f"{ab.name}: initial weight std by matrix (mean over layers and seeds)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    figure_legend(fig, [ax])  # below the axes: one entry per arm would cover the points
    return save_figure(fig, path)


def plot_vs_param(ab: Ablation, spec: dict, path: Path) -> Path | None:
    """Final metrics against a config value the arms vary (`spec["param"]`, e.g. optim.weight_decay), one line
    per regime (with its TPP). Each panel's `metric` is read as `analysis.ablation.run_value` reads it (a key,
    a pattern such as `diag/*pseudo_rank*`, or `finetune:<pattern>`)."""
    metrics = {panel["title"]: panel["metric"] for panel in spec["panels"]}
    col = f"params.{spec['param']}"
    if col not in ab.finished or not metrics:
        return None
    frame = ab.finished.assign(wd=numeric(ab.finished[col]))
    regime = frame.get("params.regime.name", pd.Series("-", index=frame.index)).astype(str)
    tpp = frame.get("params.regime.tokens_per_param", pd.Series("", index=frame.index)).astype(str)
    frame = frame.assign(regime=regime + np.where(tpp.isin(["", "None", "nan"]), "", " @" + tpp + " TPP"))
    if frame["wd"].nunique() < 2:
        return None
    fig, axes = new_figure(1, len(metrics), width=5.5)
    for ax, (title, metric) in zip(axes[0], metrics.items()):  # `spec` stays the figure's declaration
        column = f"value:{metric}"
        frame[column] = [run_value(ab, row, metric) for _, row in frame.iterrows()]
        if not np.isfinite(frame[column].to_numpy(dtype=float)).any():
            ax.set_visible(False)
            continue
        unwhiskered = []
        for i, (name, rows) in enumerate(frame.groupby("regime")):
            agg = rows.groupby("wd")[column].agg(["mean", "min", "max", "count"]).reset_index().dropna(subset=["mean"])
            if agg.empty:
                continue
            whiskers = np.clip(np.vstack([agg["mean"] - agg["min"], agg["max"] - agg["mean"]]), 0.0, None)
            whiskers[:, (agg["count"] < MIN_SEEDS).to_numpy()] = 0.0
            if (agg["count"] < MIN_SEEDS).any():
                unwhiskered.append(str(name))
            ax.errorbar(agg["wd"], agg["mean"], yerr=whiskers,
                        marker="o", capsize=3, color=f"C{i}", label=f"{name} (n per point: {int(agg['count'].min())}+)")
        too_few_seeds(ax, unwhiskered)
        if spec.get("xscale") == "symlog":
            ax.set_xscale("symlog", linthresh=float(spec.get("linthresh", 0.01)))
        ax.set_xlabel(spec.get("xlabel", spec["param"]))
        ax.set_ylabel(title, fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"{ab.name}: {spec['title']} (point = mean over seeds, whisker = min-max)", fontsize=10)
    return save_figure(fig, path)


FIGURE_KINDS = {
    "trajectories": plot_declared_trajectories,
    "final_bars": plot_final_bars,
    "vs_param": plot_vs_param,
    "init_std": plot_declared_init_std,
}

# Figures every report may draw, declared like a technique's (the loss curves and the effects forest plot
# are drawn by the report itself: they need its tables).
CORE_FIGURES = (
    {"file": "init_std.png", "caption": "Initial weight std by matrix, measured at step 0.", "kind": "init_std"},
    {"file": "stable_rank.png", "caption": "Stable rank trajectory.", "kind": "trajectories",
     "title": "stable rank ||W||_F^2 / ||W||_2^2 (mean over layers)", "ylabel": "stable rank",
     "panels": [{"each": "diag/stable_rank/mean/", "title": "stable rank, {name}"}]},
)


def has_data_for(ab: Ablation, patterns: list[str]) -> bool:
    """Any of `patterns` present: a final metric matching it, or `finetune:*` for any fine-tune run."""
    metrics = [c[len("metrics."):] for c in ab.finished.columns if c.startswith("metrics.")]
    for pattern in patterns:
        if pattern.startswith("finetune:"):
            if not ab.finetunes.empty:
                return True
        elif any(fnmatch.fnmatchcase(m, pattern) for m in metrics):
            return True
    return False


def plot_figure(ab: Ablation, spec: dict, out: Path) -> Path | None:
    """Draw one declared figure into `out/<file>` when its data exists; None otherwise."""
    if spec["kind"] not in FIGURE_KINDS:
        raise ValueError(f"Figure {spec.get('file')}: unknown kind '{spec['kind']}' "
                         f"(known: {', '.join(FIGURE_KINDS)}).")
    if spec.get("only_with") and not has_data_for(ab, list(spec["only_with"])):
        return None
    return FIGURE_KINDS[spec["kind"]](ab, spec, Path(out) / spec["file"])
