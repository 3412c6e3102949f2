"""Report figures (PNG, no pyplot state): each function draws only when its data exists, else returns None.

Every figure says what it shows without the code: a title with the experiment, axis labels with units,
a legend naming arms and how many seeds the mean and band cover. An interval (band, whisker, CI bar)
over fewer than MIN_SEEDS seeds would look like evidence it is not, so none is drawn: the axes say
"too few seeds" instead.
"""

from __future__ import annotations

import fnmatch
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.ablation import Ablation, run_value
from analysis.claims import join_arm, split_arm
from analysis.verdict import MIN_SEEDS
from analysis.curves import mean_band
from analysis.load_runs import numeric

DPI = 100
TOKENS_LABEL = "tokens seen (training tokens)"


def _figure(nrows: int = 1, ncols: int = 1, width: float = 7.0, height: float = 4.5):
    fig = Figure(figsize=(width * ncols if ncols > 1 else width, height * nrows if nrows > 1 else height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # keeps legends placed outside the axes
    return path


def _mean_and_range(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Column means and the [below, above] whisker lengths to min and max (never negative); no whiskers
    (None) over fewer than MIN_SEEDS rows (seeds)."""
    mean = np.nanmean(values, axis=0)
    if values.shape[0] < MIN_SEEDS:
        return mean, None
    below = np.clip(mean - np.nanmin(values, axis=0), 0.0, None)
    above = np.clip(np.nanmax(values, axis=0) - mean, 0.0, None)
    return mean, np.vstack([below, above])


def too_few_seeds(ax, names: list[str]) -> None:
    """Say on the axes which series got no interval because they have fewer than MIN_SEEDS seeds."""
    if names:
        ax.text(0.01, 0.01, f"too few seeds (< {MIN_SEEDS}) for an interval: {', '.join(names)}",
                transform=ax.transAxes, fontsize=7, color="dimgray", va="bottom", ha="left")


def arm_colors(arms: list[str]) -> dict[str, str]:
    return {arm: f"C{i % 10}" for i, arm in enumerate(arms)}


def _groups(ab: Ablation) -> dict[str, list[str]]:
    return {arm: list(ab.run_ids(arm).values()) for arm in ab.arms}


def _label(ab: Ablation, arm: str) -> str:
    n = len(ab.run_ids(arm))
    tag = " [baseline]" if arm == ab.baseline and "baseline" not in arm else ""
    return f"{arm}{tag}, {n} seed{'s' if n != 1 else ''}"


def _draw_bands(ax, ab: Ablation, curves: pd.DataFrame, key: str, band: bool = True, marker: str | None = "o",
                arms: list[str] | None = None) -> bool:
    """Mean over seeds per arm (all, or `arms`), and the min-max band where at least MIN_SEEDS seeds
    reached a point."""
    colors = arm_colors(ab.arms)
    table = mean_band(curves, key, _groups(ab))
    unbanded = []
    for arm in ab.arms if arms is None else arms:
        rows = table[table["group"] == arm].sort_values("tokens_seen")
        if rows.empty:
            continue
        ax.plot(rows["tokens_seen"], rows["mean"], color=colors[arm], marker=marker, markersize=3,
                label=_label(ab, arm))
        enough = (rows["n"] >= MIN_SEEDS).to_numpy()
        if band and enough.any():
            ax.fill_between(rows["tokens_seen"], rows["min"], rows["max"], where=enough, color=colors[arm],
                            alpha=0.2, linewidth=0)
        elif band:
            unbanded.append(arm)
    too_few_seeds(ax, unbanded)
    return not table.empty


# ---------------------------------------------------------------------------------------- losses


ZOOM_FROM = 0.1  # the zoomed y-range reaches up to the loss at this fraction of a panel's tokens


def plot_loss_curves(ab: Ablation, path: Path) -> Path | None:
    """Validation loss (mean, band = min-max over seeds) and training loss (mean) against tokens seen:
    one row of panels per variant (model rung), each arm compared only within its own.

    The first steps' losses are several times the final ones, so a full y-range squeezes every arm into
    one line: each panel's y-axis spans where the curves separate (from the lowest final value to the
    highest loss at ZOOM_FROM of the tokens), and an inset keeps the whole curve in view.
    """
    if ab.curves.empty or not (ab.curves["key"] == "val/loss").any():
        return None
    has_train = (ab.curves["key"] == "train/loss").any()
    variants = ab.variants() or [""]
    fig, axes = _figure(len(variants), 2 if has_train else 1, width=6.5, height=4.3)
    for row, variant in enumerate(variants):
        arms = [a for a in ab.arms if split_arm(a)[1] == variant]
        rung = f" [{variant}]" if variant else ""
        ax = axes[row][0]
        _draw_bands(ax, ab, ab.curves, "val/loss", arms=arms)
        reference = join_arm(split_arm(ab.baseline)[0], variant)
        base = [v for v in _finals(ab, "val/loss", reference) if math.isfinite(v)]
        if base:
            ax.axhline(float(np.mean(base)), color="black", linestyle="--", linewidth=0.8,
                       label=f"{reference} final val/loss ({np.mean(base):.3f})")
        ax.set_xlabel(TOKENS_LABEL)
        ax.set_ylabel("validation loss (nats/token)")
        ax.set_title(f"{ab.name}{rung}: validation loss vs tokens\n(line = mean over seeds, band = min-max)", fontsize=10)
        _zoom_with_inset(ax, ab, "val/loss", arms)
        # Below the panel: inside it would cover the curves where they separate.
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
        if has_train:
            ax = axes[row][1]
            _draw_bands(ax, ab, ab.curves, "train/loss", band=False, marker=None, arms=arms)
            ax.set_xlabel(TOKENS_LABEL)
            ax.set_ylabel("training loss (nats/token)")
            ax.set_title(f"{ab.name}{rung}: training loss vs tokens\n(mean over seeds; colours as on the left)",
                         fontsize=10)
            _zoom_with_inset(ax, ab, "train/loss", arms)
    return _save(fig, path)


def zoom_range(table: pd.DataFrame, arms: list[str], start_fraction: float = ZOOM_FROM) -> tuple[float, float] | None:
    """(low, high): the lowest final mean (or band minimum) of the arms, and the highest mean loss at
    `start_fraction` of each arm's tokens, padded by 5%; None when that leaves no range."""
    lows, highs = [], []
    for arm in arms:
        rows = table[table["group"] == arm].sort_values("tokens_seen")
        if rows.empty:
            continue
        lows.append(float(min(rows["mean"].iloc[-1], rows["min"].iloc[-1])))
        later = rows[rows["tokens_seen"] >= start_fraction * rows["tokens_seen"].max()]
        highs.append(float(later["mean"].iloc[0]))
    if not lows or not all(map(math.isfinite, lows + highs)) or max(highs) <= min(lows):
        return None
    pad = 0.05 * (max(highs) - min(lows))
    return min(lows) - pad, max(highs) + pad


def _zoom_with_inset(ax, ab: Ablation, key: str, arms: list[str]) -> None:
    table = mean_band(ab.curves, key, {arm: list(ab.run_ids(arm).values()) for arm in arms})
    limits = zoom_range(table, arms)
    if limits is None:
        return
    ax.set_ylim(*limits)
    inset = ax.inset_axes([0.58, 0.55, 0.4, 0.4])
    colors = arm_colors(ab.arms)
    for arm in arms:
        rows = table[table["group"] == arm].sort_values("tokens_seen")
        inset.plot(rows["tokens_seen"], rows["mean"], color=colors[arm], linewidth=0.9)
    inset.axhspan(*limits, color="0.85", zorder=0)
    inset.set_title("whole run (grey: the zoomed range)", fontsize=6)
    inset.tick_params(labelsize=6)
    inset.xaxis.get_offset_text().set_fontsize(6)


def _finals(ab: Ablation, key: str, arm: str) -> list[float]:
    col = f"metrics.{key}"
    rows = ab.finished[ab.finished["arm"] == arm]
    return [float(v) for v in rows[col]] if col in rows else []


def plot_effects(table: pd.DataFrame, metric: str, path: Path, title: str) -> Path | None:
    """Forest plot: per arm the paired mean difference with its 95% paired t interval (from MIN_SEEDS seeds on)
    and the largest reference seed sd as a grey band."""
    rows = table[table["metric"] == metric] if not table.empty else table
    if rows.empty:
        return None
    fig, axes = _figure(1, 1, width=7.5, height=2.2 + 0.45 * len(rows))
    draw_effects(axes[0][0], rows, metric, title)
    return _save(fig, path)


def draw_effects(ax, rows: pd.DataFrame, metric: str, title: str) -> None:
    """The forest plot of `plot_effects` on one axes (rows of an effects table for one metric)."""
    y = np.arange(len(rows))[::-1]
    diff = rows["diff"].to_numpy(dtype=float)
    enough = rows["n"].to_numpy() >= MIN_SEEDS
    err = np.vstack([diff - rows["ci_low"].to_numpy(dtype=float), rows["ci_high"].to_numpy(dtype=float) - diff])
    if enough.any():
        ax.errorbar(diff[enough], y[enough], xerr=np.abs(err[:, enough]), fmt="o", color="C0", capsize=3)
    if (~enough).any():
        ax.plot(diff[~enough], y[~enough], "o", color="C0", markerfacecolor="none")
    too_few_seeds(ax, [str(a) for a in rows["arm"][~enough]])
    sd = rows["seed_sd"].to_numpy(dtype=float)
    legend = "dot = mean difference, bar = 95% paired t interval"
    if np.isfinite(sd).any():
        spread = float(np.nanmax(sd))
        ax.axvspan(-spread, spread, color="gray", alpha=0.2)
        legend += f", grey = +/- the reference seed sd {spread:.3g}"
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(y, [f"{a} - {r} (n={n})" for a, r, n in zip(rows["arm"], rows["reference"], rows["n"])], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    better = rows["better"].iloc[0]
    ax.set_xlabel(f"{metric}: arm - reference, paired by seed ({better} is better)")
    ax.set_title(f"{title}\n({legend})", fontsize=9)


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
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    fig, axes = _figure(nrows, ncols, width=5.0, height=3.8)
    for ax, (name, frame) in zip(axes.flat, shown.items()):
        _draw_bands(ax, ab, frame, name)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(TOKENS_LABEL, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        if logy:
            ax.set_yscale("log")
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    fig.suptitle(f"{ab.name}: {title}\n(line = mean over seeds, band = min-max)", fontsize=10)
    return _save(fig, path)


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
    one subplot per declared panel `{prefix, ylabel, logy}`; arms without any value are left out."""
    panels = []
    for panel in spec["panels"]:
        cols = sorted(c for c in ab.finished.columns if c.startswith(f"metrics.{panel['prefix']}"))
        if cols:
            panels.append((cols, panel))
    if not panels:
        return None
    first = panels[0][0]
    arms = [a for a in ab.arms if not ab.finished[ab.finished["arm"] == a][first].isna().all().all()]
    groups = max(len(cols) for cols, _ in panels)
    fig, axes = _figure(1, len(panels), width=max(6.0, 1.1 * groups * max(1, len(arms)) / 3))
    colors = arm_colors(ab.arms)
    for ax, (cols, panel) in zip(axes[0], panels):
        names = [c.rsplit("/", 1)[-1] for c in cols]
        x = np.arange(len(names))
        width = 0.8 / max(1, len(arms))
        unwhiskered = []
        for i, arm in enumerate(arms):
            mean, whiskers = _mean_and_range(ab.finished[ab.finished["arm"] == arm][cols].to_numpy(dtype=float))
            ax.bar(x + i * width, mean, width, yerr=whiskers, capsize=2, color=colors[arm], label=_label(ab, arm))
            if whiskers is None:
                unwhiskered.append(arm)
        too_few_seeds(ax, unwhiskered)
        ax.set_xticks(x + width * (len(arms) - 1) / 2, names)
        ax.set_xlabel(spec.get("xlabel", ""))
        ax.set_ylabel(panel.get("ylabel", ""), fontsize=8)
        if panel.get("logy"):
            ax.set_yscale("log")
        ax.legend(fontsize=7)
    legend = "bar = mean over seeds, whisker = min-max"
    if len(panels) == 1:
        axes[0][0].set_title(f"{ab.name}: {spec['title']}\n({legend})", fontsize=10)
    else:
        fig.suptitle(f"{ab.name}: {spec['title']} ({legend})", fontsize=10)
    return _save(fig, path)


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
    fig, axes = _figure(1, 1, width=max(7.0, 0.8 * len(names)))
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
        ax.plot(x - 0.3 + (i + 0.5) * offset, mean, "o", color=colors[arm], label=_label(ab, arm))
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
    ax.legend(fontsize=7)
    return _save(fig, path)


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
    fig, axes = _figure(1, len(metrics), width=5.5)
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
    return _save(fig, path)


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
