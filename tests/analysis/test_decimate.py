"""Curves thinned for an export: a point cap per (run, metric), the endpoints and every point a report reads kept."""

import numpy as np
import pandas as pd
import pytest

from analysis.ablation import TRAIN_TAIL
from analysis.curves import tokens_to_target
from analysis.decimate import MAX_POINTS, decimate_curves, kept_positions
from analysis.results_data import read_results_data, write_results_data
from tests.helpers.handmade_ablation import handmade

PER_STEP = 512


def _series(run_id: str, key: str, values, every: int = 10) -> pd.DataFrame:
    steps = np.arange(len(values)) * every + every - 1
    return pd.DataFrame({"run_id": run_id, "key": key, "step": steps, "tokens_seen": (steps + 1.0) * PER_STEP,
                         "value": np.asarray(values, dtype=float)})


def _noisy_loss(n: int, seed: int) -> np.ndarray:
    """A falling loss with noise: many points are no new low, so the cap has something to drop."""
    rng = np.random.default_rng(seed)
    return 2.0 + 3.0 * np.exp(-np.arange(n) / (n / 5)) + rng.normal(0.0, 0.05, n)


def test_a_long_curve_keeps_its_endpoints_its_tail_and_at_most_the_cap():
    curve = _series("a" * 32, "train/loss", _noisy_loss(1000, 0))
    thin = decimate_curves(curve)
    assert len(thin) == MAX_POINTS
    assert thin["step"].iloc[0] == curve["step"].iloc[0]
    assert list(thin["step"].iloc[-TRAIN_TAIL:]) == list(curve["step"].iloc[-TRAIN_TAIL:])
    assert thin["step"].is_monotonic_increasing and thin["step"].is_unique
    # Rows are the original rows, unchanged: no value is averaged or moved.
    merged = thin.merge(curve, on=["run_id", "key", "step"], suffixes=("", "_full"))
    assert len(merged) == len(thin) and (merged["value"] == merged["value_full"]).all()
    assert (merged["tokens_seen"] == merged["tokens_seen_full"]).all()
    # Evenly spread: no gap between kept steps is more than twice the mean gap.
    gaps = np.diff(thin["step"].to_numpy())
    assert gaps.max() <= 2 * (curve["step"].iloc[-1] - curve["step"].iloc[0]) / (MAX_POINTS - TRAIN_TAIL)


def test_a_short_curve_and_its_dtypes_are_left_as_they_are():
    curve = _series("b" * 32, "val/loss", [3.0, 2.5, 2.6, 2.2])
    thin = decimate_curves(curve)
    pd.testing.assert_frame_equal(thin, curve)


def test_seeds_logged_on_one_schedule_keep_the_same_steps():
    curves = pd.concat([_series(f"{s}" * 32, "train/loss", _noisy_loss(700, s)) for s in range(3)])
    thin = decimate_curves(curves)
    steps = [tuple(g["step"]) for _, g in thin.groupby("run_id")]
    assert len(steps) == 3 and len(set(steps)) == 1 and len(steps[0]) <= MAX_POINTS


def test_tokens_to_any_target_the_lowest_value_and_the_budget_are_the_whole_curves():
    values = _noisy_loss(600, 1)
    curve = _series("c" * 32, "val/loss", values)
    thin = decimate_curves(curve, max_points=40)
    assert len(thin) < len(curve)  # points that are no new low (and not next to one) went
    for target in np.linspace(values.min() - 0.01, values.max() + 0.01, 301):
        full = tokens_to_target(curve["tokens_seen"], curve["value"], target)
        assert tokens_to_target(thin["tokens_seen"], thin["value"], target) == full
    assert thin["value"].min() == curve["value"].min()
    assert thin["tokens_seen"].iloc[-1] == curve["tokens_seen"].iloc[-1]
    assert thin["value"].iloc[-TRAIN_TAIL:].mean() == curve["value"].iloc[-TRAIN_TAIL:].mean()
    # Other metrics are not kept for crossings: the same curve under another key is cut to the cap.
    assert len(decimate_curves(curve.assign(key="train/loss"), max_points=40)) == 40


def test_a_missing_value_is_skipped_when_finding_the_point_before_a_new_low():
    values = np.array([5.0, 4.0, np.nan, 3.0, 3.5, 3.6, 3.7, 3.8, 3.9, 4.0, 4.1, 4.2])
    kept = kept_positions(values, max_points=TRAIN_TAIL + 2, crossings=True)
    assert {0, 1, 3} <= set(kept)  # 3.0 is a new low; the finite point before it is position 1


def test_thinning_twice_changes_nothing():
    curves = pd.concat([_series("d" * 32, "val/loss", _noisy_loss(900, 2)),
                        _series("d" * 32, "train/loss", _noisy_loss(900, 3)),
                        _series("e" * 32, "diag/stable_rank/mean/q", _noisy_loss(300, 4))])
    once = decimate_curves(curves, max_points=30)
    pd.testing.assert_frame_equal(decimate_curves(once, max_points=30), once)


def test_a_cap_that_cannot_hold_the_tail_is_refused():
    with pytest.raises(ValueError, match="max_points"):
        decimate_curves(_series("f" * 32, "val/loss", [1.0] * 10), max_points=TRAIN_TAIL)


def test_the_export_writes_the_thinned_curves(tmp_path):
    ab = handmade({"baseline": [2.0, 2.1, 2.05], "arm": [1.9, 2.0, 1.95]})
    long = pd.concat([_series(run_id, "train/loss", _noisy_loss(500, i))
                      for i, run_id in enumerate(ab.finished["run_id"])])
    ab.curves = pd.concat([ab.curves, long.astype(ab.curves.dtypes.to_dict())], ignore_index=True)
    write_results_data(ab, tmp_path)
    back = read_results_data(tmp_path).curves
    sizes = back[back["key"] == "train/loss"].groupby("run_id").size()
    assert sizes.between(MAX_POINTS - TRAIN_TAIL, MAX_POINTS).all() and len(sizes) == 6
    pd.testing.assert_frame_equal(back, decimate_curves(ab.curves))


def test_an_older_export_is_thinned_once_into_the_gzip_file_and_reads_the_same(tmp_path):
    from analysis.results_data import CURVES_FILE, PLAIN_CURVES_FILE, _write_csv
    from analysis.thin_results import thin_folder

    ab = handmade({"baseline": [2.0, 2.1, 2.05]})
    long = pd.concat([_series(run_id, "train/loss", _noisy_loss(400, i))
                      for i, run_id in enumerate(ab.finished["run_id"])])
    ab.curves = pd.concat([ab.curves, long.astype(ab.curves.dtypes.to_dict())], ignore_index=True)
    write_results_data(ab, tmp_path)
    data = tmp_path / "data"
    (data / CURVES_FILE).unlink()
    _write_csv(ab.curves, data / PLAIN_CURVES_FILE)  # as exports wrote it before: every point, plain CSV
    pd.testing.assert_frame_equal(read_results_data(tmp_path).curves, ab.curves)
    assert thin_folder(tmp_path) == (len(ab.curves), len(decimate_curves(ab.curves)))
    assert not (data / PLAIN_CURVES_FILE).exists()
    thinned = (data / CURVES_FILE).read_bytes()
    pd.testing.assert_frame_equal(read_results_data(tmp_path).curves, decimate_curves(ab.curves))
    thin_folder(tmp_path)
    assert (data / CURVES_FILE).read_bytes() == thinned  # again: the same bytes
