"""Report figures (PNG, no pyplot state): each function draws only when its data exists, else returns None.

Every figure says what it shows without the code: a title with the experiment, axis labels with units,
a legend naming arms and how many seeds the mean and band cover. An interval (band, whisker, CI bar)
over fewer than MIN_SEEDS seeds would look like evidence it is not, so none is drawn: the axes say
"too few seeds" instead.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.ablation import Ablation
from analysis.claims import join_arm, split_arm
from analysis.verdict import MIN_SEEDS
from analysis.curves import mean_band

DPI = 100
TOKENS_LABEL = "tokens seen (training tokens)"


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 7.0, height: float = 4.5):
    fig = Figure(figsize=(width * ncols if ncols > 1 else width, height * nrows if nrows > 1 else height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def save_figure(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # keeps legends placed outside the axes
    return path


def mean_and_range(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
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


def arm_groups(ab: Ablation) -> dict[str, list[str]]:
    return {arm: list(ab.run_ids(arm).values()) for arm in ab.arms}


def arm_label(ab: Ablation, arm: str) -> str:
    n = len(ab.run_ids(arm))
    tag = " [baseline]" if arm == ab.baseline and "baseline" not in arm else ""
    return f"{arm}{tag}, {n} seed{'s' if n != 1 else ''}"


def draw_bands(ax, ab: Ablation, curves: pd.DataFrame, key: str, band: bool = True, marker: str | None = "o",
                arms: list[str] | None = None) -> bool:
    """Mean over seeds per arm (all, or `arms`), and the min-max band where at least MIN_SEEDS seeds
    reached a point."""
    colors = arm_colors(ab.arms)
    table = mean_band(curves, key, arm_groups(ab))
    unbanded = []
    for arm in ab.arms if arms is None else arms:
        rows = table[table["group"] == arm].sort_values("tokens_seen")
        if rows.empty:
            continue
        ax.plot(rows["tokens_seen"], rows["mean"], color=colors[arm], marker=marker, markersize=3,
                label=arm_label(ab, arm))
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
    fig, axes = new_figure(len(variants), 2 if has_train else 1, width=6.5, height=4.3)
    for row, variant in enumerate(variants):
        arms = [a for a in ab.arms if split_arm(a)[1] == variant]
        rung = f" [{variant}]" if variant else ""
        ax = axes[row][0]
        draw_bands(ax, ab, ab.curves, "val/loss", arms=arms)
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
            draw_bands(ax, ab, ab.curves, "train/loss", band=False, marker=None, arms=arms)
            ax.set_xlabel(TOKENS_LABEL)
            ax.set_ylabel("training loss (nats/token)")
            ax.set_title(f"{ab.name}{rung}: training loss vs tokens\n(mean over seeds; colours as on the left)",
                         fontsize=10)
            _zoom_with_inset(ax, ab, "train/loss", arms)
    return save_figure(fig, path)


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
    fig, axes = new_figure(1, 1, width=7.5, height=2.2 + 0.45 * len(rows))
    draw_effects(axes[0][0], rows, metric, title)
    return save_figure(fig, path)


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
