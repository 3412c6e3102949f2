"""The trend, rungs.csv and the backtest read ladder rungs (`<arm>@l<depth>`) at the ladder's declared sizes."""

import math

import pandas as pd
import pytest

from analysis.prediction import BACKTEST, prediction_table
from analysis.report import render_report
from analysis.rungs import ladder_rung, model_shape, rung_of, trend_family
from analysis.trend import GROWS
from analysis.trend_report import LADDER_ONLY, trend_table
from tests.helpers.handmade_ablation import handmade


def _by_hand(layers: int, d: int) -> int:
    """A dense Llama block: q, k, v, o (4 d^2), SwiGLU at d_ff = 3 d (3 x d x 3d), two norms (2 d); final norm d."""
    return layers * (4 * d * d + 3 * d * (3 * d) + 2 * d) + d


LADDER = {"l2": 26_784, "l3": 90_192, "l4": 213_568, "l6": 720_096}


def test_a_ladder_rung_is_the_last_variant_and_what_precedes_it_the_family() -> None:
    arms = ["g8_origin@tpp1.3@l6", "a@l2", "a@x4", "a", "a@tpp1.3", "a@l4@lr3e-3", "a@lr3e-3", "a@l5", "l4", "a@l44"]
    assert [(trend_family(a), rung_of(a)) for a in arms] == [
        ("g8_origin@tpp1.3", "l6"), ("a", "l2"), ("a", "x4"), ("a", ""), ("a@tpp1.3", ""),
        ("a@l4@lr3e-3", ""), ("a@lr3e-3", ""), ("a@l5", ""), ("l4", ""), ("a@l44", "")]  # l5: not on the ladder


def test_the_ladders_sizes_are_the_ones_counted_by_hand() -> None:
    assert _by_hand(2, 32) == 26_784 and _by_hand(6, 96) == 720_096
    l2, l6 = ladder_rung("l2"), ladder_rung("l6")
    assert (l2.params_non_embedding, l2.n_layers, l2.d_model) == (26_784, 2, 32)
    assert (l6.params_non_embedding, l6.n_layers, l6.d_model) == (720_096, 6, 96)
    assert {r: ladder_rung(r).params_non_embedding for r in LADDER} == LADDER
    # A run logs its model's name: a ladder rung's or a model option's shape, nothing for a name neither knows.
    assert model_shape("l6") == (6, 96) and model_shape("tiny_x4") == (2, 128)
    assert all(math.isnan(v) for v in model_shape("no_such_model"))


def _verdicts(effects: dict[str, float], logged: float = 1.0, n: int = 8, sd: float = 0.001) -> pd.DataFrame:
    """Verdict rows of arm `w` at each variant; the logged size is wrong on purpose: a ladder rung's is declared."""
    return pd.DataFrame([{
        "arm": "w" + (f"@{v}" if v else ""), "reference": "b" + (f"@{v}" if v else ""), "metric": "val/loss",
        "role": "primary" if v == "l4" else "secondary", "expect": "better", "better": "lower", "n": n,
        "diff": e, "sd_diff": sd, "params_non_embedding": logged, "verdict": "-"} for v, e in effects.items()])


def _line(n: float) -> float:
    return 0.1 - 0.01 * math.log(n)


def test_a_trend_over_ladder_rungs_has_the_known_slope_and_leaves_the_plain_arm_out() -> None:
    effects = {r: _line(n) for r, n in LADDER.items()} | {"": 0.5}  # the plain arm far off the line
    row = trend_table(_verdicts(effects)).iloc[0]
    assert (row["arm_family"], row["reference_family"]) == ("w", "b")
    assert row["slope"] == pytest.approx(-0.01, rel=1e-6) and row["statement"] == GROWS
    assert row["rungs_measured"] == 4 and row["rungs_fitted"] == 4
    parts = row["rungs"].split("; ")
    assert [p.split(" (")[0] for p in parts[:4]] == ["l2", "l3", "l4", "l6"]
    assert parts[0].startswith("l2 (N=26.8k)") and parts[3].startswith("l6 (N=720k)")
    assert parts[4] == f"base: not used ({LADDER_ONLY})"


def test_old_factor_rungs_keep_their_logged_sizes_beside_a_ladder_family() -> None:
    # `v@x4` is its own family, sized as today by its logged count (1.0 here), untouched by `w@l*`.
    x = _verdicts({"": -0.01, "x4": -0.02}).assign(arm=["v", "v@x4"], reference=["u", "u@x4"],
                                                     params_non_embedding=[100.0, 400.0], role="primary")
    table = trend_table(pd.concat([_verdicts({r: _line(n) for r, n in LADDER.items()}), x])).set_index("arm_family")
    assert table.loc["v", "rungs"].startswith("base (N=100)") and "x4 (N=400)" in table.loc["v", "rungs"]


def test_the_ladder_backtest_predicts_l6_from_l2_l3_l4() -> None:
    effects = {r: _line(n) for r, n in LADDER.items()}
    back = prediction_table(_verdicts(effects), extrapolate_to=()).iloc[0]
    assert back["kind"] == BACKTEST and back["rung"] == "l6" and back["fitted_on"] == "l2, l3, l4"
    assert back["params_non_embedding"] == 720_096 and back["predicted"] == pytest.approx(_line(720_096))
    assert back["covered"]
    # The plain arm beside them is no fifth rung (no size), so it changes nothing.
    with_plain = prediction_table(_verdicts(effects | {"": 0.5}), extrapolate_to=()).iloc[0]
    assert with_plain["fitted_on"] == "l2, l3, l4" and with_plain["predicted"] == pytest.approx(back["predicted"])


def test_rungs_csv_lists_ladder_rungs_at_their_declared_size_and_factor_rungs_with_their_models_shape(tmp_path):
    # `no_decay` at three ladder rungs (and plain, left out); `no_decay@c` an old family at base and x4.
    values = {}
    for variant in ("l2", "l3", "l6", "", "c", "c@x4"):
        base = [3.0, 3.01, 3.02]
        suffix = f"@{variant}" if variant else ""
        values[f"baseline{suffix}"] = base
        values[f"no_decay{suffix}"] = [b - 0.05 + e for b, e in zip(base, (0.001, 0.0, -0.001))]
    # Logged counts deliberately not the ladder's (a GQA reference logs fewer): the ladder rungs ignore them.
    params = {"l2": 20_000, "l3": 80_000, "l6": 700_000, "": 106_816, "c": 106_816, "c@x4": 426_624}
    models = {"l2": "l2", "l3": "l3", "l6": "l6", "c@x4": "tiny_x4"}  # `c` logs no model name
    render_report(handmade(values, claim="smoke", params=params, models=models), tmp_path)
    rungs = pd.read_csv(tmp_path / "rungs.csv").set_index("rung")
    assert list(rungs.columns[:5]) == ["model", "reference", "params_non_embedding", "n_layers", "d_model"]
    assert {"params_total", "tokens", "tpp", "arms"} <= set(rungs.columns)
    assert list(rungs.index) == ["l2", "l3", "c", "c@x4", "l6"]  # smallest first; the plain arm is no rung here
    assert rungs.loc["l2", ["params_non_embedding", "n_layers", "d_model"]].tolist() == [26_784, 2, 32]
    assert rungs.loc["l6", ["params_non_embedding", "n_layers", "d_model"]].tolist() == [720_096, 6, 96]
    assert rungs.loc["l6", "tpp"] == pytest.approx(2_000_000 / 720_096)  # the budget over the declared size
    assert rungs.loc["c@x4", ["params_non_embedding", "n_layers", "d_model", "model"]].tolist() == [
        426_624, 2, 128, "tiny_x4"]  # an old rung: its logged count, its model option's shape
    assert rungs.loc["c", "params_non_embedding"] == 106_816 and math.isnan(rungs.loc["c", "n_layers"])  # no name
    trend = pd.read_csv(tmp_path / "trend.csv").set_index("arm_family")
    assert trend.loc["no_decay", "rungs_measured"] == 3 and "base: not used" in trend.loc["no_decay", "rungs"]
    assert trend.loc["no_decay@c", "rungs_measured"] == 2
