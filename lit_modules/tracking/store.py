"""Where runs are tracked: a local SQLite store under the runs folder unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path

from mlflow.tracking import MlflowClient


def tracking_uri(configured: str | None, runs_dir: str) -> str:
    """Config beats the environment, the environment beats the local default."""
    if configured:
        return configured
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    path = Path(runs_dir).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path / 'mlflow.db'}"


def artifact_root(runs_dir: str) -> str:
    return (Path(runs_dir).resolve() / "mlartifacts").as_uri()


def get_or_create_experiment(client: MlflowClient, name: str, runs_dir: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_root(runs_dir))
    except Exception:  # noqa: BLE001 - another worker created it first
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id
