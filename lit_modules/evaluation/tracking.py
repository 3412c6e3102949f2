"""Write an evaluation outcome into an existing MLflow run: metrics, `eval.*` tags and the artifact folder."""

from __future__ import annotations

import time

from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from .evaluate import EvalOutcome

ARTIFACT_PATH = "eval"
_BATCH = 1000  # MLflow's cap on metrics per log_batch call


def outcome_tags(outcome: EvalOutcome) -> dict[str, str]:
    keys = (
        "batch_size",
        "add_bos",
        "bos_token",
        "max_seq_len",
        "precision",
        "lm_eval_version",
        "num_fewshot",
        "limit",
    )
    # max_seq_len here is the context the adapter used (eval.context_len or the training length)
    return {f"eval.{k}": str(outcome.settings[k]) for k in keys if k in outcome.settings}


def log_outcome(client: MlflowClient, run_id: str, outcome: EvalOutcome, step: int = 0) -> None:
    """Log into `run_id` (which may already be finished); never opens a run."""
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, step) for k, v in sorted(outcome.metrics.items())]
    for start in range(0, len(metrics), _BATCH):
        client.log_batch(run_id, metrics=metrics[start : start + _BATCH], synchronous=True)
    tags = [RunTag(k, v) for k, v in outcome_tags(outcome).items()]
    if tags:
        client.log_batch(run_id, tags=tags, synchronous=True)
    if outcome.artifacts and outcome.out_dir is not None:
        client.log_artifacts(run_id, str(outcome.out_dir), artifact_path=ARTIFACT_PATH)
