"""Where runs are tracked: a local SQLite store under the runs folder unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path

from mlflow.tracking import MlflowClient

from lit_modules.tracking.uri_masking import keep_off_stdout

# Tracking URIs served by an MLflow server (or a hosted one), which decides where artifacts go.
SERVER_SCHEMES = ("http", "https", "databricks")


def resolve_tracking_uri(configured: str | None, runs_dir: str) -> str:
    """Config beats the environment, the environment beats the local default; nothing is created."""
    if configured:
        return keep_off_stdout(configured)
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return keep_off_stdout(os.environ["MLFLOW_TRACKING_URI"])
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


def artifact_location(uri: str, runs_dir: str) -> str | None:
    """Where a new experiment keeps artifacts: under the runs folder for a store this process writes
    itself (SQLite, a database URL); a tracking server's own choice otherwise (None), so that every
    machine uploads through the server instead of writing to a folder only this machine can see."""
    return None if uri.split("://", 1)[0] in SERVER_SCHEMES else artifact_root(runs_dir)


def get_or_create_experiment(client: MlflowClient, name: str, runs_dir: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return experiment.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri, runs_dir))
    except Exception:  # noqa: BLE001 - another worker created it first
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id
