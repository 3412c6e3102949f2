"""The MLflow store that finished runs live in, opened for reading them: it must exist already.

Training opens (and on first use creates) its store through lit_modules.tracking.store; the verbs that read
runs after training (evaluate, fine-tune, probe) come here, so a mistyped runs_dir is one sentence and no
empty store is left behind.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sqlalchemy.engine import make_url

from lit_modules.config.errors import ConfigError
from lit_modules.runs.store_check import check_store
from lit_modules.runs.uri_masking import keep_off_stdout

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


RUNS_DIR_WORD = "runs_dir=<the folder the run was trained in>"  # how the key=value verbs take the folder


def open_store(runs_dir: str | Path = "runs", tracking_uri: str | None = None,
               runs_dir_word: str = RUNS_DIR_WORD) -> MlflowClient:
    """A client on `tracking_uri`, else $MLFLOW_TRACKING_URI, else `<runs_dir>/mlflow.db`, which must exist;
    `runs_dir_word` is how this verb's user passes the folder (the export: --runs-dir).

    The store is checked first (a server answers within seconds, a database is writable): ConfigError."""
    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        database = Path(runs_dir).resolve() / "mlflow.db"
        if not database.is_file():
            raise ConfigError(f"There is no MLflow store at {database}; pass {runs_dir_word}.")
        uri = f"sqlite:///{database}"
    elif not store_exists(uri):  # a client would create it, empty
        raise ConfigError(f"There is no MLflow store at {uri}; point MLFLOW_TRACKING_URI at the store the run is in.")
    check_store(uri)
    from mlflow.tracking import MlflowClient  # here: a verb that refuses before the lookup never loads MLflow

    return MlflowClient(keep_off_stdout(uri))


def store_exists(uri: str) -> bool:
    """False only for a local store not made yet (an SQLite file, a file-store folder): nothing can be found
    in it, and a client opened on it would create it. A server's or a database's store is assumed to exist."""
    if uri.startswith("sqlite:"):
        database = make_url(uri).database
        return not database or database == ":memory:" or Path(database).exists()
    scheme = urlparse(uri).scheme
    if scheme in ("", "file"):
        return Path(urlparse(uri).path if scheme else uri).exists()
    return True
