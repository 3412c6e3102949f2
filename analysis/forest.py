"""The verdicts' forest plot: per check, every tested row's mean difference with the interval it was decided
on (its own level: 95% secondary, 1 - alpha/k primary), each rung on its own line, the paper's effect marked.

Rows with no interval (not testable, did not reach, too few seeds) are listed by name, not drawn as bars.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.plots import save_figure
from analysis.verdict import NO_CLAIM, PRIMARY

FOREST_FILE = "forest.png"
DPI = 110


def plot_forest(verdicts: pd.DataFrame, path: Path, title: str) -> Path | None:
    """One panel per check metric; None when no row was tested."""
    rows = verdicts[verdicts["verdict"] != NO_CLAIM] if not verdicts.empty else verdicts
    if rows.empty:
        return None
    panels = list(dict.fromkeys(zip(rows["metric"], rows["variant"] == "tuned")))
    heights = [len(rows[(rows["metric"] == m) & ((rows["variant"] == "tuned") == t)]) for m, t in panels]
    fig = Figure(figsize=(8.5, 1.2 * len(panels) + 0.32 * sum(heights)))
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": [h + 1.5 for h in heights]})
    for ax, (metric, tuned) in zip(axes[:, 0], panels):
        _panel(ax, rows[(rows["metric"] == metric) & ((rows["variant"] == "tuned") == tuned)], metric, tuned)
    fig.suptitle(f"{title}\ndot = mean difference (arm - reference), bar = the interval the verdict used "
                 "(its level in the label), red x = the paper's effect", fontsize=9)
    return save_figure(fig, path, DPI)


def _panel(ax, rows: pd.DataFrame, metric: str, tuned: bool) -> None:
    y = np.arange(len(rows))[::-1]
    diff = rows["diff"].to_numpy(dtype=float)
    low, high = rows["ci_low"].to_numpy(dtype=float), rows["ci_high"].to_numpy(dtype=float)
    drawn = np.isfinite(low) & np.isfinite(high) & np.isfinite(diff)
    primary = (rows["role"] == PRIMARY).to_numpy()
    for mask, color in ((drawn & primary, "C0"), (drawn & ~primary, "C7")):
        if mask.any():
            ax.errorbar(diff[mask], y[mask], xerr=np.vstack([diff[mask] - low[mask], high[mask] - diff[mask]]),
                        fmt="o", color=color, capsize=3)
    effect = rows["paper_effect"].to_numpy(dtype=float)
    if np.isfinite(effect).any():
        ax.plot(effect[np.isfinite(effect)], y[np.isfinite(effect)], "x", color="red", markersize=8)
    ax.axvline(0.0, color="black", linewidth=0.8)
    labels = []
    for (_, r), ok in zip(rows.iterrows(), drawn):
        level = f"{r['ci_level']:.3g}" if math.isfinite(r["ci_level"]) else ""
        tag = f"{r['role'][0].upper()} {level}" if ok else r["verdict"]
        labels.append(f"{r['arm']} (n={int(r['n'])}; {tag})")
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    units = "ln(speedup)" if metric == "speedup" else metric
    ax.set_xlabel(f"{units}{', each side at its best LR' if tuned else ''} ({rows['better'].iloc[0]} is better;"
                  " blue = primary, grey = secondary)", fontsize=8)
