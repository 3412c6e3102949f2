"""Curves thinned for an export: at most MAX_POINTS points per (run, metric), every point a report reads kept.

    thin = decimate_curves(curves)      # a curves frame (analysis.load_runs), fewer rows, same columns

A run logs train/loss every few steps; the committed results folders must stay small as the evidence grows,
and a figure cannot show more points than it has pixels. What a report reads from a curve stays exact:

- the first point and the last TAIL points: the run's budget (its last tokens), its final value, and the
  mean of its last TRAIN_TAIL train/loss values (analysis.comparisons.final_train_loss);
- on the curves a speedup reads (CROSSING_KEYS, val/loss): every point that is lower than all before it,
  and the point before each. Tokens to a target (analysis.curves.tokens_to_target) read the first point at
  or below the target, which is always such a point, and interpolate from the one before it; so the tokens
  to any target and the curve's lowest value are the whole curve's. Such a curve may keep more than
  MAX_POINTS points (a loss that keeps falling keeps most of its evaluations);
- the rest: evenly spaced by position over the room left. On every other curve that room is the same for
  runs logged on one schedule (an arm's seeds), so they keep the same steps and their mean and band over
  seeds stay aligned.

A series keeps at most MAX_POINTS points unless the points it must keep are more, so thinning a thinned
frame changes nothing: an export can be thinned again without drifting.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.ablation import TRAIN_TAIL

MAX_POINTS = 128
TAIL = TRAIN_TAIL
CROSSING_KEYS = ("val/loss",)


def decimate_curves(curves: pd.DataFrame, max_points: int = MAX_POINTS,
                    crossing_keys: tuple[str, ...] = CROSSING_KEYS) -> pd.DataFrame:
    """`curves` with each (run_id, key) series thinned to `max_points` (see the module docstring); the rows
    keep their order, columns and dtypes."""
    if max_points < TAIL + 2:
        raise ValueError(f"max_points={max_points} cannot hold a curve's first and last {TAIL} points.")
    if curves.empty:
        return curves.reset_index(drop=True)
    frame = curves.reset_index(drop=True)
    keep = np.zeros(len(frame), dtype=bool)
    for (_, key), rows in frame.groupby(["run_id", "key"], sort=False):
        ordered = rows.sort_values("step", kind="stable")
        # A point without tokens is no point of a tokens-to-target reading (analysis.curves drops it).
        values = ordered["value"].to_numpy(dtype=float)
        values = np.where(np.isfinite(ordered["tokens_seen"].to_numpy(dtype=float)), values, np.nan)
        chosen = kept_positions(values, max_points, key in crossing_keys)
        keep[ordered.index.to_numpy()[chosen]] = True
    return frame[keep].reset_index(drop=True)


def kept_positions(values: np.ndarray, max_points: int = MAX_POINTS, crossings: bool = False) -> np.ndarray:
    """Sorted positions kept of one series (in step order; NaN: no value): all when it fits; else the first,
    the last TAIL and, with `crossings`, each new lowest value and the finite point before it, then an even
    grid over the room left under `max_points`."""
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    must = {0, *range(n - TAIL, n)}
    if crossings:
        finite = np.flatnonzero(np.isfinite(values))
        lows = new_lows(values)
        if finite.size:
            before = finite[np.searchsorted(finite, lows) - 1][lows > finite[0]]  # the previous finite point
            must |= set(lows.tolist()) | set(before.tolist())
    room = max_points - len(must)
    # Positions 0 and n - 1 are in `must`: the grid adds at most `room` points.
    grid = np.round(np.linspace(0, n - 1, room + 2)).astype(int).tolist() if room > 0 else []
    return np.array(sorted(must | set(grid)), dtype=int)


def new_lows(values: np.ndarray) -> np.ndarray:
    """Positions whose finite value is below every finite value before it (the first finite one included)."""
    lowest = np.inf
    out = []
    for i, v in enumerate(values):
        if np.isfinite(v) and v < lowest:
            lowest = v
            out.append(i)
    return np.array(out, dtype=int)
