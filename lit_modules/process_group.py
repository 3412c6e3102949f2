"""A child command in its own process group, stopped as a whole: nothing it started outlives the verb.

`make mlflow-ui` (a server with workers and job consumers) and the ablation driver (Hydra's multirun with
its loky worker processes) start trees of processes. Stopped from outside (make forwards SIGTERM to its
recipe only; Ctrl-C reaches the terminal's foreground group), parts of such a tree keep running: a port
stays taken, a worker goes on training a cell of a grid that was stopped. `run_as_group` starts the command
in a new session and, on SIGINT, SIGTERM or SIGHUP (or when the command exits by itself), signals that
whole group: SIGTERM, then SIGKILL for whatever is left after a grace period.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

GRACE_S = 10.0
POLL_S = 0.1
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """The verb was asked to stop by `signum`; the group has been stopped."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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


def run_as_group(command: list[str], env: dict[str, str] | None = None, grace_s: float = GRACE_S) -> int:
    """Run `command` in its own process group and return its exit code; raise Stopped after stopping the
    whole group when this process gets SIGINT, SIGTERM or SIGHUP. Signal handlers are restored after."""

    def stop(signum, frame) -> None:
        raise Stopped(signum)

    previous = {signum: signal.getsignal(signum) for signum in STOPPING}
    child: subprocess.Popen | None = None
    try:
        for signum in STOPPING:
            signal.signal(signum, stop)
        try:
            child = subprocess.Popen(command, env=env, start_new_session=True)
            code = child.wait()
        except Stopped:
            for signum in STOPPING:  # a second Ctrl-C must not cut the clean-up short
                signal.signal(signum, signal.SIG_IGN)
            if child is not None:
                stop_group(child.pid, child, grace_s)
            raise
        stop_group(child.pid, child, grace_s)  # exited by itself: what it started must not stay behind
        return code
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
