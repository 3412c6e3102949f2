"""A fresh local MLflow store in a tenth of a second: the empty SQLite store MLflow makes (schema migrated,
its `Default` experiment "0") is built once per process and copied, instead of migrated again for each test."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

from tests.helpers.runs import mlflow_client


@functools.cache
def _template() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="mlflow-template-"))
    atexit.register(shutil.rmtree, folder, True)
    mlflow_client(folder).search_experiments()  # creates and migrates folder/mlflow.db
    return folder / "mlflow.db"


def fresh_store(runs_dir: Path):
    """`runs_dir/mlflow.db` (the store the platform's default tracking URI names for `runs_dir`), empty, and
    a client on it. Log artifacts only to an experiment made by get_or_create_experiment (under `runs_dir`):
    experiment "0" keeps the template's artifact root."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(_template(), runs_dir / "mlflow.db")
    return mlflow_client(runs_dir)
