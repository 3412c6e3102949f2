"""Where runs are tracked: a local SQLite store under the runs folder unless told otherwise."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator
from urllib.parse import urlparse

from sqlalchemy.engine import make_url

from lit_modules.data.locking import build_lock

from lit_modules.runs.store_check import HINT, StoreError
from lit_modules.runs.uri_masking import keep_off_stdout

if TYPE_CHECKING:  # MLflow loads where a client is made: resolving a URI (resume's early check) needs none
    from mlflow.tracking import MlflowClient

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


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Serialize a find-or-create step on a local SQLite database (MLflow's or Optuna's) across processes.

    Two processes that open a fresh SQLite store together both run its schema migrations and one crashes
    (`duplicate column name`); two drivers that look for their parent run together both create one. A
    `flock` on `.<db>.lock` beside the database makes the second wait for the first. Other stores (a
    tracking server, PostgreSQL) handle concurrency themselves: no lock.
    """
    database = make_url(uri).database if uri.startswith("sqlite:") else None
    if not database:  # not SQLite, or an in-memory one
        yield
        return
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(build_lock(Path(database).resolve()))
        except OSError as err:  # a folder that cannot be made or written (the entry points check it first)
            raise StoreError(f"The store {uri} cannot be created or locked ({err.strerror or err}); {HINT}.") from None
        yield


def open_client(uri: str) -> MlflowClient:
    """An MlflowClient whose store (for a fresh SQLite file: its schema) one process at a time creates."""
    from mlflow.tracking import MlflowClient

    with store_lock(uri):
        return MlflowClient(uri)


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
        created = client.create_experiment(name, artifact_location=artifact_location(client.tracking_uri, runs_dir))
    except Exception:  # noqa: BLE001 - another worker created it first
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return experiment.experiment_id
    _retire_empty_default(client)
    return created


MLFLOW_DEFAULT_EXPERIMENT = ("0", "Default")


def _retire_empty_default(client: MlflowClient) -> None:
    """A fresh local (SQLite) store comes with MLflow's empty `Default` experiment, which the UI lists
    beside the platform's own (`runs`, `sweeps`): delete it while nothing is in it. A shared store's (a
    server, a database others use) is left alone."""
    if not client.tracking_uri.startswith("sqlite:"):
        return
    from mlflow.entities import ViewType

    experiment_id, name = MLFLOW_DEFAULT_EXPERIMENT
    try:
        default = client.get_experiment(experiment_id)
        if default.name == name and default.lifecycle_stage == "active" and not client.search_runs(
                [experiment_id], max_results=1, run_view_type=ViewType.ALL):
            client.delete_experiment(experiment_id)
    except Exception:  # noqa: BLE001 - already gone, or a store without it: nothing to tidy
        return
