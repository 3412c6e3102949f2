"""Bookkeeping metrics have no prefix (MLflow shows them after the losses); older names still read."""

import pandas as pd
import pytest

from analysis.comparisons import seconds_per_token
from lit_modules.runs import metric_names


def test_older_names_map_to_todays_and_todays_stay() -> None:
    assert metric_names.current_name("lr/mlp.pc_gamma") == metric_names.learning_rate("mlp.pc_gamma") == "lr_mlp.pc_gamma"
    assert metric_names.current_name("perf/tokens_per_s") == metric_names.TOKENS_PER_S
    for key in ("train/loss", "val/loss", "lr_emb", "tokens_seen", "diag/gmcn/all"):
        assert metric_names.current_name(key) == key
    assert all("/" not in key for key in (*metric_names.TIMING, metric_names.TOKENS_SEEN, metric_names.learning_rate("qk")))


@pytest.mark.parametrize("rate_key", ["tokens_per_s", "perf/tokens_per_s"])
def test_seconds_per_token_reads_a_run_logged_under_either_name(rate_key: str) -> None:
    # The first (warm-up) log is left out; the median of the rest is 1000 tokens/s.
    curves = pd.DataFrame({"key": [rate_key] * 4, "step": [9, 19, 29, 39], "value": [10.0, 900.0, 1000.0, 1100.0]})
    assert seconds_per_token(curves, tokens_per_step=512) == pytest.approx(1e-3)
