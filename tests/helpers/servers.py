"""Throwaway servers on loopback for the `distributed` tests: a PostgreSQL cluster and an MLflow server.

PostgreSQL: `initdb` into a fresh temporary folder, then the `postgres` server as a child process on
127.0.0.1 and a free port (plus a Unix socket in a private folder), password-authenticated over TCP with
a password generated per session; as root both run as the unprivileged `postgres` user, since PostgreSQL
refuses to run as root. MLflow: `mlflow server` backed by a database of that cluster, serving artifacts
itself (proxied) from a temporary folder. Both are stopped by their PID (SIGINT / SIGTERM, then SIGKILL),
at the end of the session, also when a test fails.

Where PostgreSQL cannot be started the tests that need it are skipped with one sentence, unless
LLM_ABLATE_REQUIRE_CLUSTER=1 (set by `make test-distributed`), which turns that into a failure.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
REQUIRE_ENV = "LLM_ABLATE_REQUIRE_CLUSTER"
PG_USER = "llm_ablate"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bin() -> Path | None:
    """The folder with initdb and postgres: on PATH, else Debian's newest /usr/lib/postgresql/<n>/bin."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def stop_process(process: subprocess.Popen, first_signal: int, group: bool = False) -> None:
    """Stop by PID (or by the process group it leads): a polite signal, then SIGKILL; bounded in time."""
    if process.poll() is not None:
        return
    send = (lambda sig: os.killpg(process.pid, sig)) if group else process.send_signal
    try:
        send(first_signal)
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        send(signal.SIGKILL)
        process.wait(timeout=STOP_TIMEOUT_S)
    except ProcessLookupError:
        pass


@dataclass
class Postgres:
    root: Path
    port: int
    password: str
    process: subprocess.Popen
    socket_dir: Path
    log: Path
    databases: list[str] = field(default_factory=list)

    def url(self, database: str, with_password: bool = True, driver: str = "postgresql+psycopg") -> str:
        auth = f"{PG_USER}:{self.password}" if with_password else PG_USER
        return f"{driver}://{auth}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(host=str(self.socket_dir), port=self.port, user=PG_USER, dbname="postgres",
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.databases.append(name)
        return name

    def stop(self) -> None:
        stop_process(self.process, signal.SIGINT)  # SIGINT: PostgreSQL's fast shutdown
        shutil.rmtree(self.root, ignore_errors=True)


def _as_user() -> dict:
    """Popen arguments that drop root to the `postgres` user (initdb and postgres refuse to run as root)."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        entry = pwd.getpwnam("nobody")
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def start_postgres() -> Postgres:
    bindir = postgres_bin()
    if bindir is None:
        raise RuntimeError("no initdb on PATH or under /usr/lib/postgresql (make setup-cluster installs it)")
    import psycopg  # noqa: F401 - the driver the tests need, checked before anything starts

    root = Path(tempfile.mkdtemp(prefix="llm-ablate-pg-"))  # under /tmp: traversable by the postgres user
    data, sockets, log = root / "data", root / "socket", root / "postgres.log"
    sockets.mkdir(mode=0o700)
    password = secrets.token_urlsafe(18)
    pwfile = root / "pwfile"
    pwfile.write_text(password + "\n")
    user = _as_user()
    if user:
        for path in (root, sockets, pwfile):
            os.chown(path, user["user"], user["group"])
    try:
        subprocess.run(
            [str(bindir / "initdb"), "-D", str(data), "-U", PG_USER, f"--pwfile={pwfile}", "--auth-local=trust",
             "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"],
            check=True, capture_output=True, text=True, timeout=120, cwd=root, **user,
        )
    except subprocess.CalledProcessError as err:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {(err.stderr or err.stdout).strip().splitlines()[-1]}") from None
    pwfile.unlink()
    port = free_port()
    with open(log, "w") as out:
        if user:
            os.chown(log, user["user"], user["group"])
        process = subprocess.Popen(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=200"],
            stdout=out, stderr=subprocess.STDOUT, cwd=root, start_new_session=True, **user,
        )
    server = Postgres(root, port, password, process, sockets, log)
    try:
        _wait_until(lambda: _accepts_connections(server), process, log, "PostgreSQL")
    except RuntimeError:
        server.stop()
        raise
    return server


def _accepts_connections(server: Postgres) -> bool:
    import psycopg

    try:
        psycopg.connect(server.url("postgres", driver="postgresql"), connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def _wait_until(ready, process: subprocess.Popen, log: Path, name: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with code {process.returncode}: {_tail(log)}")
        if ready():
            return
        time.sleep(0.3)
    stop_process(process, signal.SIGTERM, group=True)
    raise RuntimeError(f"{name} did not answer within {START_TIMEOUT_S:g} s: {_tail(log)}")


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").strip().splitlines() if log.is_file() else []
    return " | ".join(lines[-3:]) or "no output"


@dataclass
class MlflowServer:
    url: str
    process: subprocess.Popen
    artifacts: Path
    log: Path

    def stop(self) -> None:
        # The server runs uvicorn workers as children: its process group goes, led by its PID.
        stop_process(self.process, signal.SIGTERM, group=True)


def start_mlflow_server(postgres: Postgres, root: Path) -> MlflowServer:
    """`mlflow server` on 127.0.0.1 backed by a fresh database; the password reaches it as PGPASSWORD
    (libpq), never on its command line. Artifacts are proxied: clients upload them over HTTP."""
    database = postgres.create_database("mlflow")
    artifacts, log = root / "mlflow-artifacts", root / "mlflow-server.log"
    artifacts.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "PGPASSWORD": postgres.password}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "w") as out:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "mlflow"), "server",
             "--backend-store-uri", postgres.url(database, with_password=False),
             "--artifacts-destination", artifacts.as_uri(), "--serve-artifacts",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True,
        )
    server = MlflowServer(f"http://127.0.0.1:{port}", process, artifacts, log)
    _wait_until(lambda: _healthy(server.url), process, log, "mlflow server")
    return server


def _healthy(url: str) -> bool:
    try:
        urllib.request.urlopen(f"{url}/health", timeout=2).close()
    except OSError:
        return False
    return True


def _unavailable(reason: str) -> None:
    sentence = f"PostgreSQL cannot be started here ({reason}); make setup-cluster installs what is missing."
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(sentence, pytrace=False)
    pytest.skip(sentence)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    try:
        server = start_postgres()
    except (RuntimeError, ImportError, OSError, subprocess.SubprocessError) as err:
        _unavailable(str(err))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def tracking_server(postgres: Postgres, tmp_path_factory) -> Iterator[MlflowServer]:
    server = start_mlflow_server(postgres, tmp_path_factory.mktemp("mlflow-server"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def optuna_storage(postgres: Postgres, request) -> str:
    """A fresh database for one test's Optuna study; the URL carries the password (masking is tested)."""
    name = "optuna_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:40]
    return postgres.url(postgres.create_database(name))


def start_mlflow_ui(runs_dir: Path, root: Path) -> MlflowServer:
    """`make mlflow-ui`'s launcher over the SQLite store of `runs_dir`, on a free loopback port (one worker)."""
    port, log = free_port(), root / "mlflow-ui.log"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "lit_modules.tracking.ui_launcher",
             "--backend-store-uri", f"sqlite:///{Path(runs_dir).resolve() / 'mlflow.db'}",
             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=Path(__file__).resolve().parents[2],
            start_new_session=True,
        )
    server = MlflowServer(f"http://127.0.0.1:{port}", process, Path(runs_dir) / "mlartifacts", log)
    _wait_until(lambda: _healthy(server.url), process, log, "mlflow ui")
    return server
