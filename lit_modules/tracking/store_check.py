"""Is the MLflow tracking store usable? Asked once, quickly, before any data or model is built.

MLflow itself finds out only when a run is opened, and for a server only after its HTTP retries
(MLFLOW_HTTP_REQUEST_MAX_RETRIES=7 with backoff: minutes). The check creates nothing: a local store is
made when the first run is opened.
"""

from __future__ import annotations

import base64
import os
import socket
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlparse

from lit_modules.config.errors import ConfigError
from lit_modules.tracking.uri_masking import mask_password

TIMEOUT_S = 5.0
# SQLAlchemy backends MLflow accepts, by the port their servers listen on unless told otherwise.
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
HINT = "point MLFLOW_TRACKING_URI (or logger.tracking_uri) at a store this machine can use"


class StoreError(ConfigError):
    """The tracking store cannot be reached or written: one sentence, exit code 2."""


def check_store(uri: str, timeout_s: float = TIMEOUT_S) -> None:
    """Raise StoreError when `uri` names a store that cannot be used from here; creates nothing."""
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+", 1)[0]
    if scheme == "sqlite":
        path = uri.split("://", 1)[1].removeprefix("/").split("?", 1)[0]
        if path and path != ":memory:":
            _check_writable(uri, Path(path))
    elif scheme in ("", "file"):
        _check_writable(uri, Path(parsed.path if scheme else uri))
    elif scheme in ("http", "https"):
        _check_server(uri, timeout_s)
    elif scheme in DATABASE_PORTS and parsed.hostname:
        _check_port(uri, parsed.hostname, parsed.port or DATABASE_PORTS[scheme], timeout_s)
    # Other schemes (databricks, plugins) authenticate in their own ways: MLflow reports those itself.


def _check_writable(uri: str, path: Path) -> None:
    """The store file (or folder) exists and is writable, or can be created under a writable folder."""
    path = path.expanduser().absolute()
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise StoreError(f"The MLflow store {uri} is not writable ({path}); {HINT}.")
        return
    ancestor = next(p for p in path.parents if p.exists())
    if not ancestor.is_dir():
        raise StoreError(
            f"The MLflow store {uri} cannot be created: {ancestor} is a file, not a folder; {HINT}."
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise StoreError(f"The MLflow store {uri} cannot be created: {ancestor} is not writable; {HINT}.")


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


def _check_port(uri: str, host: str, port: int, timeout_s: float) -> None:
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as err:
        raise StoreError(
            f"The MLflow store {mask_password(uri)} is unreachable ({err}, within {timeout_s:g} s); {HINT}."
        ) from None
