"""The loss figure a researcher reads first: one panel per variant in a grid, zoomed where curves separate;
every figure at most MAX_PIXELS on its longest side."""

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


def test_loss_figure_has_one_panel_per_variant_in_a_grid(tmp_path) -> None:
    """Before: every rung's arms shared one axis with the first steps' losses, and no curve could be told apart;
    then one row per rung made a column taller than ten screens."""
    arms = {"baseline": [2.0, 2.1, 2.05], "pc": [1.9, 1.95, 1.92]}
    one = plots.plot_loss_curves(handmade(arms), tmp_path / "one.png")
    two = plots.plot_loss_curves(handmade({**arms, "baseline@x4": [1.6, 1.62, 1.61], "pc@x4": [1.5, 1.52, 1.51]}),
                                 tmp_path / "two.png")
    many = plots.plot_loss_curves(handmade({f"{a}@lr{k}": v for k in range(12) for a, v in arms.items()}),
                                  tmp_path / "many.png")
    (h1, w1), (h2, w2), (hm, wm) = (matplotlib.image.imread(p).shape[:2] for p in (one, two, many))
    assert w2 > 1.3 * w1 and h2 < 1.3 * h1  # the x4 rung's panel beside the first
    assert max(hm, wm) <= plots.MAX_PIXELS and hm > 1.5 * h1 and wm > 2.5 * w1  # 12 panels: rows and columns


def test_a_figure_too_large_for_a_screen_is_saved_at_a_lower_dpi(tmp_path) -> None:
    fig, axes = plots.new_figure(1, 1, width=40.0, height=3.0)
    axes[0][0].plot([0, 1], [0, 1])
    height, width = matplotlib.image.imread(plots.save_figure(fig, tmp_path / "wide.png")).shape[:2]
    assert plots.MAX_PIXELS * 0.95 <= width <= plots.MAX_PIXELS and height < 200
    fig, axes = plots.new_figure(1, 1, width=6.0, height=4.0)
    height, width = matplotlib.image.imread(plots.save_figure(fig, tmp_path / "small.png")).shape[:2]
    assert 550 <= width <= 650  # a figure that fits keeps DPI
