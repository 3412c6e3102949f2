"""An export keeps the final value of every metric a claim can be judged on (a stability check on
train/grad_norm came out "0 seeds" when train/* was dropped)."""

import pandas as pd

from analysis.ablation import slim_runs
from analysis.claims import checked_metrics


def test_training_metrics_and_every_checked_metric_survive_the_slimming():
    frame = pd.DataFrame([{"run_id": "r", "status": "FINISHED", "metrics.train/grad_norm": 0.5,
                           "metrics.train/loss": 2.0, "metrics.diag/logit_normalizer/rms": 0.1,
                           "metrics.system/cpu": 99.0, "params.optim.lr": "1e-3"}])
    kept = set(slim_runs(frame).columns)
    assert {"metrics.train/grad_norm", "metrics.train/loss", "metrics.diag/logit_normalizer/rms"} <= kept
    assert "metrics.system/cpu" not in kept  # what no report reads stays out of the export


def test_checked_metrics_name_what_the_claims_check():
    names = checked_metrics()
    assert "val/loss" in names and "diag/logit_normalizer/rms" in names and "eval/" in names
    assert not any(n.startswith("finetune:") or n == "speedup" for n in names)
