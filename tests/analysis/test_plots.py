"""The loss figure a researcher reads first: one row of panels per variant, zoomed where curves separate."""

import matplotlib.image
import pandas as pd
import pytest

from analysis import plots
from tests.helpers.handmade_ablation import handmade


def test_zoom_range_spans_the_lowest_final_value_to_the_loss_at_a_tenth_of_the_tokens() -> None:
    tokens = [100.0 * k for k in range(1, 11)]  # 10% of 1000 tokens is the first point
    table = pd.DataFrame({
        "group": ["a"] * 10 + ["b"] * 10,
        "tokens_seen": tokens * 2,
        "mean": [5.0, 3.0, 2.5, 2.3, 2.2, 2.1, 2.05, 2.0, 1.95, 1.9] + [4.0, 2.8, 2.4, 2.2, 2.1, 2.0, 1.9, 1.85, 1.82, 1.8],
    })
    table["min"], table["max"] = table["mean"] - 0.01, table["mean"] + 0.01
    low, high = plots.zoom_range(table, ["a", "b"])
    pad = 0.05 * (5.0 - 1.79)
    assert low == pytest.approx(1.79 - pad) and high == pytest.approx(5.0 + pad)
    low, high = plots.zoom_range(table, ["a", "b"], start_fraction=0.3)  # the third point: 2.5 and 2.4
    assert high == pytest.approx(2.5 + 0.05 * (2.5 - 1.79))
    assert plots.zoom_range(table, ["missing"]) is None


def test_loss_figure_has_one_row_per_variant(tmp_path) -> None:
    """Before: every rung's arms shared one axis with the first steps' losses, and no curve could be told apart."""
    one = plots.plot_loss_curves(handmade({"baseline": [2.0, 2.1, 2.05], "pc": [1.9, 1.95, 1.92]}), tmp_path / "one.png")
    two = plots.plot_loss_curves(handmade({"baseline": [2.0, 2.1, 2.05], "pc": [1.9, 1.95, 1.92],
                                           "baseline@x4": [1.6, 1.62, 1.61], "pc@x4": [1.5, 1.52, 1.51]}),
                                 tmp_path / "two.png")
    height_one, height_two = (matplotlib.image.imread(p).shape[0] for p in (one, two))
    assert height_two > 1.7 * height_one  # a second row of panels for the x4 rung
