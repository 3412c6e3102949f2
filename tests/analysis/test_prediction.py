"""Does the ladder predict? The backtest on the largest rung and the extrapolations (analysis/prediction.py)."""

import math

import pandas as pd
import pytest

from analysis.prediction import BACKTEST, EXTRAPOLATION, prediction_table, recipe_sizes
from analysis.trend import fit_trend

SIZES = [25_000, 50_000, 100_000, 400_000]


def _verdicts(effects, n=8, sd=0.01):
    return pd.DataFrame([{
        "arm": "w" + (f"@{v}" if v else ""), "reference": "b" + (f"@{v}" if v else ""), "metric": "val/loss",
        "role": "primary" if not v else "secondary", "expect": "better", "better": "lower", "n": n, "diff": e,
        "sd_diff": sd, "params_non_embedding": size, "verdict": "-"}
        for v, size, e in zip(["x0.25", "x0.5", "", "x4"], SIZES, effects)])


def test_the_largest_rung_is_predicted_from_the_others_with_its_own_error_in_the_interval():
    effects = [0.1 - 0.01 * math.log(s) for s in SIZES]
    table = prediction_table(_verdicts(effects), extrapolate_to=(("big", 1e9),))
    back = table[table["kind"] == BACKTEST].iloc[0]
    assert back["rung"] == "x4" and back["fitted_on"] == "x0.25, x0.5, base"
    assert back["predicted"] == pytest.approx(effects[-1]) and back["covered"]
    se = 0.01 / math.sqrt(8)
    line = fit_trend(SIZES[:3], effects[:3], [se] * 3).line
    assert (back["pi_low"], back["pi_high"]) == pytest.approx(line.predict(SIZES[-1], own_se=se)[1:])
    assert back["same_side_as_largest"] == "3 of 3"
    far = table[table["kind"] == EXTRAPOLATION].iloc[0]
    assert far["rung"] == "big" and far["predicted"] == pytest.approx(0.1 - 0.01 * math.log(1e9))
    assert far["pi_low"] < far["predicted"] < far["pi_high"] and math.isnan(far["measured"])


def test_a_largest_rung_off_the_line_is_not_covered():
    effects = [0.1 - 0.01 * math.log(s) for s in SIZES[:3]] + [0.5]
    back = prediction_table(_verdicts(effects, sd=0.001), extrapolate_to=()).iloc[0]
    assert back["measured"] == 0.5 and not back["covered"] and back["same_side_as_largest"] == "0 of 3"


def test_three_rungs_are_no_backtest():
    assert prediction_table(_verdicts([-0.01, -0.02, -0.03, -0.04]).iloc[:3], extrapolate_to=()).empty
    # A rung with too few seeds does not count toward the four.
    assert prediction_table(_verdicts([-0.01, -0.02, -0.03, -0.04]).assign(n=[8, 8, 2, 8])).empty


def test_the_recipes_sizes_are_their_models_non_embedding_counts():
    sizes = dict(recipe_sizes())
    assert sizes["gpt2_124m"] == 84_953_856 and sizes["llama_1b"] == 924_919_808


def test_the_shape_count_is_the_models_own():
    from omegaconf import OmegaConf

    from analysis.prediction import non_embedding_params
    from lit_modules.config import files
    from lit_modules.model import LlamaConfig, count_parameters
    from lit_modules.model.meta import meta_llama

    for name in ("tiny", "gpt2_124m", "llama_271m"):
        node = OmegaConf.load(files.option_path("model", name))
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(LlamaConfig), node, {"vocab_size": 1}))
        assert non_embedding_params(node) == count_parameters(meta_llama(cfg))["non_embedding"], name
