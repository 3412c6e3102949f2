"""`make mlflow-ui`: the MLflow UI in its own process group, stopped as a whole on Ctrl-C or SIGTERM.

    python -m lit_modules.tracking.ui_launcher <mlflow ui options>

`mlflow ui` starts a uvicorn server with worker processes, a job runner and several huey job consumers.
Stopped from outside (make forwards SIGTERM to its recipe only; Ctrl-C reaches whatever is in the
terminal's group), some of them outlive it: the port stays taken and consumers keep running. This launcher
starts MLflow in a new session (its own process group), and on SIGINT, SIGTERM or SIGHUP (or when MLflow
exits by itself) signals that whole group: SIGTERM, then SIGKILL for whatever is left after a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_S = 10.0  # for the server and consumers to stop cleanly before SIGKILL
POLL_S = 0.1
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Stop(Exception):
    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def mlflow_command(options: list[str]) -> list[str]:
    """The `mlflow` entry point of this interpreter's environment, running `ui`."""
    script = Path(sys.executable).with_name("mlflow")
    program = [str(script)] if script.is_file() else [sys.executable, "-m", "mlflow"]
    return [*program, "ui", *options]


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still running (zombies, which hold no port, do not count)."""
    proc = Path("/proc")
    if not proc.is_dir():  # no procfs: ask the kernel, which also counts zombies
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited while we looked
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            return True
    return False


def stop_group(pgid: int, leader: subprocess.Popen, grace_s: float = GRACE_S) -> None:
    """SIGTERM the whole group, wait (bounded) for it to empty, then SIGKILL what is left."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            leader.poll()  # reap our own child, so it does not linger as a zombie
            if not group_alive(pgid):
                return
            time.sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    options = sys.argv[1:] if argv is None else argv

    def stop(signum, frame) -> None:
        raise _Stop(signum)

    server: subprocess.Popen | None = None
    for signum in STOPPING:
        signal.signal(signum, stop)
    try:
        server = subprocess.Popen(mlflow_command(options), start_new_session=True)
        code = server.wait()
    except _Stop as stopped:
        for signum in STOPPING:  # a second Ctrl-C must not cut the clean-up short
            signal.signal(signum, signal.SIG_IGN)
        if server is not None:
            stop_group(server.pid, server)
        return 128 + stopped.signum
    stop_group(server.pid, server)  # MLflow exited by itself: its consumers must not stay behind
    return code


if __name__ == "__main__":
    sys.exit(main())
