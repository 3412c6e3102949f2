"""Is the MLflow tracking store usable? Asked once, quickly, before any data or model is built.

MLflow itself finds out only when a run is opened, and for a server only after its HTTP retries
(MLFLOW_HTTP_REQUEST_MAX_RETRIES=7 with backoff: minutes). The check leaves nothing behind (a local folder
is tried with a throwaway file it removes): a local store is made when the first run is opened.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlparse

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX platforms: the store lock is a no-op there too
    fcntl = None

from lit_modules.config.errors import ConfigError
from lit_modules.runs.uri_masking import mask_password

TIMEOUT_S = 5.0
# SQLAlchemy backends MLflow accepts, by the port their servers listen on unless told otherwise.
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
HINT = "point MLFLOW_TRACKING_URI (or logger.tracking_uri) at a store this machine can use"


class StoreError(ConfigError):
    """The tracking store cannot be reached or written: one sentence, exit code 2."""


def check_store(uri: str, timeout_s: float = TIMEOUT_S, what: str = "The MLflow store", hint: str = HINT) -> None:
    """Raise StoreError when `uri` names a store that cannot be used from here; leaves nothing behind.
    `what` and `hint` begin and end its sentences (the default: MLflow's tracking store)."""
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+", 1)[0]
    if scheme == "sqlite":
        path = uri.split("://", 1)[1].removeprefix("/").split("?", 1)[0]
        if path and path != ":memory:":
            _check_writable(uri, Path(path), what, hint)
    elif scheme in ("", "file"):
        _check_writable(uri, Path(parsed.path if scheme else uri), what, hint)
    elif scheme in ("http", "https"):
        _check_server(uri, timeout_s)
    elif scheme in DATABASE_PORTS:
        check_database_driver(uri, what, hint)
        if parsed.hostname:
            _check_port(uri, parsed.hostname, parsed.port or DATABASE_PORTS[scheme], timeout_s, what, hint)
    # Other schemes (databricks, plugins) authenticate in their own ways: MLflow reports those itself.


def check_database_driver(uri: str, what: str, hint: str) -> None:
    """The SQLAlchemy URL names a dialect SQLAlchemy knows, and its Python driver imports here (a machine set up
    with `make setup` has no PostgreSQL driver: that is `make setup-cluster`)."""
    from sqlalchemy.engine import make_url

    try:
        dialect = make_url(uri).get_dialect()
    except Exception:  # noqa: BLE001 - ArgumentError (not a URL), NoSuchModuleError (no such dialect)
        raise StoreError(f"{what} {mask_password(uri)} is not a database URL SQLAlchemy knows (e.g. "
                         f"sqlite:///<file> or postgresql+psycopg://<user>@<host>/<database>); {hint}.") from None
    try:
        (getattr(dialect, "import_dbapi", None) or dialect.dbapi)()  # import_dbapi: SQLAlchemy 2; dbapi: 1.4
    except ImportError as err:
        driver = err.name or dialect.driver
        setup = ("install it with make setup-cluster (pip extra .[cluster])" if dialect.name == "postgresql"
                 else f"install it (pip install {driver})")
        raise StoreError(f"{what} {mask_password(uri)} needs the Python driver '{driver}', which is not installed "
                         f"here; {setup}, or {hint}.") from None


def _check_writable(uri: str, path: Path, what: str, hint: str) -> None:
    """The store file (or folder) exists and is writable, or can be created under a writable folder; and
    the folder its files and lock go in takes a new file that can be locked (tried, then removed)."""
    path = path.expanduser().absolute()
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise StoreError(f"{what} {uri} is not writable ({path}); {hint}.")
        problem = _probe(path if path.is_dir() else path.parent)
        if problem:
            raise StoreError(f"{what} {uri} cannot be used: {problem}; {hint}.")
        return
    ancestor = next(p for p in path.parents if p.exists())
    if not ancestor.is_dir():
        raise StoreError(
            f"{what} {uri} cannot be created: {ancestor} is a file, not a folder; {hint}."
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise StoreError(f"{what} {uri} cannot be created: {ancestor} is not writable; {hint}.")
    # os.access trusts permission bits, which root always passes: /proc, a read-only mount or a full disk
    # answer only to a real attempt.
    problem = _probe(ancestor)
    if problem:
        raise StoreError(f"{what} {uri} cannot be created: {problem}; {hint}.")


def _probe(folder: Path) -> str | None:
    """Why a folder cannot take the store's folders, files and lock (a throwaway one tried inside it), or None."""
    try:
        scratch = tempfile.mkdtemp(prefix=".store-check-", dir=folder)
    except OSError as err:
        return f"{folder} takes no new folder ({err.strerror or err})"
    try:
        with open(os.path.join(scratch, "lock"), "a") as handle:
            handle.write("probe")
            handle.flush()
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    except OSError as err:
        return f"{folder} takes no written and locked file ({err.strerror or err})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return None


def _check_server(uri: str, timeout_s: float) -> None:
    """Any HTTP answer below 500 means a server is there (auth is MLflow's business); no answer means none."""
    try:
        urllib.request.urlopen(_health_request(uri), timeout=timeout_s).close()
    except urllib.error.HTTPError as err:
        if err.code >= 500:
            raise StoreError(f"The MLflow server {mask_password(uri)} answered HTTP {err.code}; {HINT}.") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise StoreError(
            f"The MLflow server {mask_password(uri)} is unreachable ({reason}, within {timeout_s:g} s); "
            f"start it or {HINT}."
        ) from None


def _health_request(uri: str) -> urllib.request.Request:
    """GET <server>/health; credentials in the URL (http://user:password@host) go as a Basic header,
    since urllib would take them for part of the host name."""
    parsed = urlparse(uri.rstrip("/"))
    host = f"[{parsed.hostname}]" if ":" in (parsed.hostname or "") else parsed.hostname or ""
    netloc = host + (f":{parsed.port}" if parsed.port else "")
    request = urllib.request.Request(parsed._replace(netloc=netloc).geturl() + "/health")
    if parsed.username is not None:
        token = base64.b64encode(f"{unquote(parsed.username)}:{unquote(parsed.password or '')}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    return request


def _check_port(uri: str, host: str, port: int, timeout_s: float, what: str, hint: str) -> None:
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as err:
        raise StoreError(
            f"{what} {mask_password(uri)} is unreachable ({err}, within {timeout_s:g} s); {hint}."
        ) from None
