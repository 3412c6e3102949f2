"""Stopping `make mlflow-ui` stops MLflow's server, its workers and its job consumers: nothing keeps the port.

Each test starts the real verb on a free loopback port with a store under tmp, waits for HTTP 200, stops it
the way a user does, and as soon as the verb has returned looks at every process it had started, and at
every one started since in the same sessions (MLflow's job runner spawns consumers while the server starts).
"""

import os
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.helpers.processes import PROC, process_table, started_by, still_running, wait_for
from tests.helpers.runs import REPO

pytestmark = pytest.mark.skipif(not PROC.is_dir(), reason="reads the process table from /proc")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def answers_200(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


# Ctrl-C is the slower path (23 s here) and shares the SIGTERM one's process-tree walk: make test-slow.
@pytest.mark.parametrize("how", ["SIGTERM to make", pytest.param("Ctrl-C (SIGINT to the terminal's group)",
                                                                 marks=pytest.mark.slow)])
def test_stopping_make_mlflow_ui_stops_every_process_it_started(tmp_path: Path, how: str) -> None:
    port = free_port()
    log = tmp_path / "ui.log"
    store = f"MLFLOW_STORE=sqlite:///{tmp_path / 'm.db'}"
    make = subprocess.Popen(  # in a session of its own, as if in its own terminal
        ["make", "-s", "mlflow-ui", "HOST=127.0.0.1", f"PORT={port}", store],
        cwd=REPO, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )
    started: dict[int, int] = {}
    sessions: set[int] = set()
    try:
        wait_for(lambda: answers_200(port), 240, "the UI did not answer HTTP 200")
        table = process_table()
        started = started_by(make.pid, table)
        sessions = {table[pid]["sid"] for pid in started if pid in table} | {make.pid}
        assert len(started) >= 4, started  # the launcher, MLflow, uvicorn and its workers, the job runner
        if how.startswith("SIGTERM"):
            os.kill(make.pid, signal.SIGTERM)  # `kill <pid of make>`: make passes it on to its recipe
        else:
            os.killpg(make.pid, signal.SIGINT)  # what the terminal does on Ctrl-C: the foreground group
        try:
            make.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"make mlflow-ui was still running 60 s after {how}")
        # When the verb has returned, everything it started must be gone: nothing left to die later.
        left = still_running(started, sessions)
        assert not left, f"still running after make mlflow-ui returned: {left}"
        assert not listening(port)
    finally:
        for pid in still_running(started, sessions):  # only processes this test started
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
