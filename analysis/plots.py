"""Report figures (PNG, no pyplot state): each function draws only when its data exists, else returns None.

Every figure says what it shows without the code: a title with the experiment, axis labels with units,
a legend naming arms and how many seeds the mean and band cover. An interval (band, whisker, CI bar)
over fewer than MIN_SEEDS seeds would look like evidence it is not, so none is drawn: the axes say
"too few seeds" instead.
"""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator
from PIL import Image

from analysis.ablation import Ablation
from analysis.claims import join_arm, split_arm
from analysis.verdict import MIN_SEEDS
from analysis.curves import mean_band

DPI = 100
# A committed PNG stays small and a screen shows it whole: a figure larger than this on its longest side is
# saved at a lower dpi (its layout, one panel per facet in a grid, keeps it readable there).
MAX_PIXELS = 2000
TOKENS_LABEL = "tokens seen (training tokens)"


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 7.0, height: float = 4.5):
    fig = Figure(figsize=(width * ncols if ncols > 1 else width, height * nrows if nrows > 1 else height))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    return fig, axes


def grid_shape(panels: int, min_cols: int = 3) -> tuple[int, int]:
    """(rows, columns) of a near-square grid of `panels` facets, one row up to `min_cols` wide."""
    cols = min(panels, max(min_cols, math.ceil(math.sqrt(panels))))
    return math.ceil(panels / max(cols, 1)), max(cols, 1)


def save_figure(fig: Figure, path: Path, dpi: float = DPI) -> Path:
    """Lay `fig` out (room kept above the panels for its title's lines) and save it with save_png."""
    title = fig.get_suptitle()
    room = (0.06 * (title.count("\n") + 1)) / fig.get_figheight() if title else 0.0
    fig.tight_layout(rect=(0.0, 0.0, 1.0, 1.0 - room))
    return save_png(fig, path, dpi)


def save_png(fig: Figure, path: Path, dpi: float = DPI, crop: bool = True) -> Path:
    """`fig` as a PNG cropped to what it draws (legends placed outside the axes included; `crop=False`: the
    figure as sized), at `dpi` or at the lower dpi that keeps its longest side within MAX_PIXELS, in 256
    colours (a plot has few; a third of the bytes of full colour, the same picture to the eye)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pad = 0.1  # inches, savefig's pad_inches
    box = fig.get_tightbbox(fig.canvas.get_renderer()) if crop else fig.bbox_inches
    longest = max(box.width, box.height) + (2 * pad if crop else 0.0)
    # 1% below the cap: text drawn at a lower dpi measures a little wider than the estimate.
    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=min(dpi, 0.99 * MAX_PIXELS / longest),
                **({"bbox_inches": "tight", "pad_inches": pad} if crop else {}))
    with Image.open(drawn) as image:
        image.convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE) \
            .save(path, format="PNG", optimize=True)
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


TOO_FEW_WIDTH = 75  # characters per line of the "too few seeds" note, which stays inside its axes
TOO_FEW_LINES = 3


def too_few_seeds(ax, names: list[str]) -> None:
    """Say on the axes which series got no interval because they have fewer than MIN_SEEDS seeds (a long
    list is cut: each series' seed count is in its legend or label)."""
    if names:
        text = f"too few seeds (< {MIN_SEEDS}) for an interval: {', '.join(names)}"
        lines = textwrap.wrap(text, TOO_FEW_WIDTH, max_lines=TOO_FEW_LINES,
                              placeholder=f" ... ({len(names)} in all; seed counts in the labels)")
        ax.text(0.01, 0.01, "\n".join(lines), transform=ax.transAxes, fontsize=7, color="dimgray",
                va="bottom", ha="left")


def figure_legend(fig: Figure, axes) -> None:
    """One legend for every panel, below them: the union of the panels' labelled lines, in panel order."""
    seen: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(list(seen.values()), list(seen), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                   ncol=min(4, len(seen)), fontsize=7, frameon=False)


def arm_colors(arms: list[str]) -> dict[str, str]:
    return {arm: f"C{i % 10}" for i, arm in enumerate(arms)}


def arm_groups(ab: Ablation) -> dict[str, list[str]]:
    return {arm: list(ab.run_ids(arm).values()) for arm in ab.arms}


def arm_label(ab: Ablation, arm: str) -> str:
    n = len(ab.run_ids(arm))
    tag = " [baseline]" if arm == ab.baseline and "baseline" not in arm else ""
    return f"{arm}{tag}, {n} seed{'s' if n != 1 else ''}"


def draw_bands(ax, ab: Ablation, curves: pd.DataFrame, key: str, band: bool = True, marker: str | None = "o",
               arms: list[str] | None = None, colors: dict[str, str] | None = None,
               labels: dict[str, str] | None = None, note: bool = True, **style) -> bool:
    """Mean over seeds per arm (all, or `arms`), and the min-max band where at least MIN_SEEDS seeds
    reached a point. `colors` and `labels` per arm (default: arm_colors, arm_label; an arm left out of
    `labels` gets none), `note`: say on the axes which arms have too few seeds for a band, `style`: the
    mean's line."""
    colors = colors or arm_colors(ab.arms)
    arms = ab.arms if arms is None else arms
    groups = arm_groups(ab)
    table = mean_band(curves, key, {arm: groups[arm] for arm in arms if arm in groups})
    unbanded = []
    for arm in arms:
        rows = table[table["group"] == arm].sort_values("tokens_seen")
        if rows.empty:
            continue
        label = arm_label(ab, arm) if labels is None else labels.get(arm)
        ax.plot(rows["tokens_seen"], rows["mean"], color=colors[arm], marker=marker, markersize=3,
                label=label, **style)
        enough = (rows["n"] >= MIN_SEEDS).to_numpy()
        if band and enough.any():
            ax.fill_between(rows["tokens_seen"], rows["min"], rows["max"], where=enough, color=colors[arm],
                            alpha=0.2, linewidth=0)
        elif band:
            unbanded.append(arm)
    if note:
        too_few_seeds(ax, unbanded)
    return not table.empty


# ---------------------------------------------------------------------------------------- losses


ZOOM_FROM = 0.1  # the zoomed y-range reaches up to the loss at this fraction of a panel's tokens


def plot_loss_curves(ab: Ablation, path: Path) -> Path | None:
    """Validation loss (mean, band = min-max over seeds) and training loss (mean, thin) against tokens seen:
    one panel per variant (model rung), each arm compared only within its own, the panels in a grid.

    The first steps' losses are several times the final ones, so a full y-range squeezes every arm into
    one line: each panel's y-axis spans where the curves separate (from the lowest final value to the
    highest loss at ZOOM_FROM of the tokens), and an inset keeps the whole validation curve in view. An arm
    keeps its family's colour in every panel.
    """
    if ab.curves.empty or not (ab.curves["key"] == "val/loss").any():
        return None
    has_train = (ab.curves["key"] == "train/loss").any()
    variants = ab.variants() or [""]
    families = list(dict.fromkeys(split_arm(a)[0] for a in ab.arms))
    colors = {a: f"C{families.index(split_arm(a)[0]) % 10}" for a in ab.arms}
    labels = {a: f"{split_arm(a)[0]}, {n} seed{'s' if n != 1 else ''}"
              for a in ab.arms for n in [len(ab.run_ids(a))]}
    nrows, ncols = grid_shape(len(variants))
    fig, axes = new_figure(nrows, ncols, width=4.3, height=3.3)
    for ax, variant in zip(axes.flat, variants):
        arms = [a for a in ab.arms if split_arm(a)[1] == variant]
        draw_bands(ax, ab, ab.curves, "val/loss", arms=arms, colors=colors, labels=labels, note=False)
        keys = ["val/loss"]
        if has_train:
            draw_bands(ax, ab, ab.curves, "train/loss", band=False, marker=None, arms=arms, colors=colors,
                       labels={}, linewidth=0.7, alpha=0.6)
            keys.append("train/loss")
        reference = join_arm(split_arm(ab.baseline)[0], variant)
        base = [v for v in _finals(ab, "val/loss", reference) if math.isfinite(v)]
        if base:
            ax.axhline(float(np.mean(base)), color="black", linestyle="--", linewidth=0.8,
                       label=f"{reference} final val/loss ({np.mean(base):.3f})")
        ax.set_xlabel(TOKENS_LABEL, fontsize=8)
        ax.set_ylabel("loss (nats/token)", fontsize=8)
        ax.set_title(variant or "(no variant)", fontsize=9)
        ax.tick_params(labelsize=7)
        _zoom_with_inset(ax, ab, keys, arms, colors)
        ax.legend(fontsize=6, loc="lower left")
    for ax in list(axes.flat)[len(variants):]:
        ax.set_visible(False)
    train = "; thin line = training loss, mean over seeds" if has_train else ""
    fig.suptitle(f"{ab.name}: loss vs tokens, one panel per variant\n(line with dots = validation loss, mean over "
                 f"seeds, band = min-max from {MIN_SEEDS} seeds on{train};\ny zoomed where the arms separate, "
                 "inset = the whole run)", fontsize=10)
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


def _zoom_with_inset(ax, ab: Ablation, keys: list[str], arms: list[str], colors: dict[str, str]) -> None:
    """Zoom `ax` to where the arms' curves of `keys` separate; the inset shows the first key's whole run."""
    groups = {arm: list(ab.run_ids(arm).values()) for arm in arms}
    tables = [mean_band(ab.curves, key, groups) for key in keys]
    ranges = [r for r in (zoom_range(t, arms) for t in tables) if r is not None]
    if not ranges:
        return
    limits = (min(r[0] for r in ranges), max(r[1] for r in ranges))
    ax.set_ylim(*limits)
    inset = ax.inset_axes([0.58, 0.52, 0.4, 0.38])
    for arm in arms:
        rows = tables[0][tables[0]["group"] == arm].sort_values("tokens_seen")
        inset.plot(rows["tokens_seen"], rows["mean"], color=colors[arm], linewidth=0.9)
    inset.axhspan(*limits, color="0.85", zorder=0)
    inset.set_title(f"whole run, {keys[0]} (grey: zoomed)", fontsize=6)
    inset.tick_params(labelsize=6)
    inset.xaxis.set_major_locator(MaxNLocator(3))
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
