"""Which process owns a RUNNING run, and ending the runs whose process died without saying so.

A SIGKILL (or the OOM killer, or a lost node) cannot be caught, so such a run stays RUNNING in MLflow. The
process that trains a run holds an exclusive `flock` on `owner.lock` in the run's checkpoint folder for as
long as it lives; the kernel drops the lock when the process dies, however it dies. The next process that
touches the run (a resume, a rerun of the same config) probes the lock: if it can take it, nobody owns the
run and it is ended KILLED with its reason; a run it cannot judge (its folder or lock is on another
machine) is left alone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from enum import Enum
from pathlib import Path
from typing import Iterator

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from lit_modules.config.errors import ConfigError
from lit_modules.runs import tags

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX platforms: no owner locks, runs are never judged dead
    fcntl = None

OWNER_LOCK = "owner.lock"
# The owner takes its lock moments after opening the run; a run with a checkpoint folder but no lock after
# this long was opened by a process that died first (or by code older than the lock).
OPENING_GRACE_S = 120.0
CLAIM_WAIT_S = 2.0  # a probe holds the lock for microseconds; never wait for a real owner
DIED_REASON = "its process died without ending the run (no live owner; found by {by})"


class Owner(Enum):
    ALIVE = "alive"
    DEAD = "dead"
    UNKNOWN = "unknown"


@contextlib.contextmanager
def own_run(checkpoint_dir: Path, run_id: str) -> Iterator[None]:
    """Hold the run's owner lock for the block; refuses (one sentence) if another process trains it now."""
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(checkpoint_dir / OWNER_LOCK, "a+") as handle:
        deadline = time.monotonic() + CLAIM_WAIT_S
        while not _try_lock(handle):
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"MLflow run {run_id} is being trained by another process right now "
                    f"({_holder(handle) or 'unknown host'}); wait for it to end."
                )
            time.sleep(0.05)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{socket.gethostname()} {os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def owner_of(run: Run, checkpoint_dir: str | None) -> Owner:
    """Whether the process that trains this RUNNING run is alive, as far as this machine can tell."""
    if fcntl is None or not checkpoint_dir or not Path(checkpoint_dir).is_dir():
        return Owner.UNKNOWN  # opened a moment ago, or trained where this machine cannot look
    lock = Path(checkpoint_dir) / OWNER_LOCK
    if not lock.is_file():
        age = time.time() - run.info.start_time / 1000
        return Owner.DEAD if age > OPENING_GRACE_S else Owner.ALIVE
    with open(lock, "a+") as handle:
        host = (_holder(handle) or "").split(" ")[0]
        if host and host != socket.gethostname():
            return Owner.UNKNOWN  # a lock held on another machine may not be visible from this one
        if not _try_lock(handle):
            return Owner.ALIVE
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return Owner.DEAD


def end_if_dead(client: MlflowClient, run: Run, checkpoint_dir: str | None, found_by: str) -> bool:
    """End a RUNNING run whose process is gone as KILLED, with the reason; True if it was ended."""
    if run.info.status != "RUNNING" or owner_of(run, checkpoint_dir) is not Owner.DEAD:
        return False
    client.set_tag(run.info.run_id, tags.END_REASON, DIED_REASON.format(by=found_by))
    client.set_terminated(run.info.run_id, status="KILLED")
    return True


def end_dead_runs(
    client: MlflowClient, experiment_ids: list[str], filter_string: str, found_by: str
) -> list[str]:
    """End every RUNNING run matching `filter_string` whose process is gone; returns their ids."""
    running = client.search_runs(experiment_ids, f"{filter_string} and attributes.status = 'RUNNING'")
    return [r.info.run_id for r in running
            if end_if_dead(client, r, r.data.tags.get(tags.CHECKPOINT_DIR), found_by)]


def _try_lock(handle) -> bool:
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder(handle) -> str:
    handle.seek(0)
    return handle.read().strip()
