"""Where runs are tracked: a local SQLite store under the runs folder unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path

from mlflow.tracking import MlflowClient


def resolve_tracking_uri(configured: str | None, runs_dir: str) -> str:
    """Config beats the environment, the environment beats the local default; nothing is created."""
    if configured:
        return configured
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{Path(runs_dir).resolve() / 'mlflow.db'}"


def tracking_uri(configured: str | None, runs_dir: str) -> str:
    """resolve_tracking_uri, with the local default's folder made so that a client can create the store."""
    uri = resolve_tracking_uri(configured, runs_dir)
    folder = Path(runs_dir).resolve()
    if uri == f"sqlite:///{folder / 'mlflow.db'}":
        folder.mkdir(parents=True, exist_ok=True)
    return uri


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
