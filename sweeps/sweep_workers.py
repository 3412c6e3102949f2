"""The driver's other worker processes: started before its set-up, waiting for its parent run.

A worker's imports (Lightning, MLflow, Optuna: ~10 s, more while the driver trains on the same cores) used
to start only after the driver had validated, made the study and opened the parent run, so the second
worker began its first trial ~18 s after the first. Now the entry point spawns them before
it imports the training stack itself (sweeps/optuna_sweep.py), so their imports overlap the driver's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from lit_modules.config.errors import ConfigError


def spawn_workers(argv: list[str] | None, workers: int) -> list[subprocess.Popen]:
    """Workers 1 .. workers-1 of `python -m sweeps.optuna_sweep <argv>`, each waiting for the parent run."""
    command = [sys.executable, "-m", "sweeps.optuna_sweep", *(argv if argv is not None else sys.argv[1:]),
               "--worker", "--await-parent"]
    return [subprocess.Popen([*command, "--worker-index", str(i)]) for i in range(1, workers)]


def stop_workers(others: list[subprocess.Popen]) -> None:
    """The driver refused or failed before its parent run: its waiting workers go with it."""
    for process in others:
        process.terminate()
    for process in others:
        process.wait()


def await_parent(lookup: Callable[[], str], poll_s: float = 0.2) -> str:
    """`lookup()`'s parent run id once the driver that spawned this worker has recorded it (until then it
    raises ConfigError); exits 1 when that driver is gone without one (`stop_workers` normally ends this
    process first)."""
    driver = os.getppid()
    odd = 0
    while True:
        try:
            return lookup()
        except ConfigError:
            pass  # no study, or no parent run in it, yet
        except Exception:  # noqa: BLE001 - e.g. SQLite's schema being created by the driver right now
            odd += 1
            if odd >= 50:  # not a race: the storage itself fails, as the driver will say
                raise
        if os.getppid() != driver:
            sys.exit(1)
        time.sleep(poll_s)
