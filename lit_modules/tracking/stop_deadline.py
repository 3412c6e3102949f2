"""A stop that cannot hang: after a stopping signal, the process has a grace period to end on its own.

The signal handler (`run_lifecycle`) turns Ctrl-C or SIGTERM into an interrupt, and the run ends KILLED
within seconds. Should anything in that shutdown block (a lock left held by interrupted library code, a
store that does not answer), the deadline prints every thread's stack to stderr and exits with
128 + signal. The run's owner lock dies with the process, so the next process that touches the run ends
it KILLED (`run_owner`). Only an entry point turns this on (`enable_stop_deadline`): a test or a notebook
that calls `train.run` in its own process is never shot down.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading

from lit_modules.config.errors import ConfigError

GRACE_ENV = "LLM_STOP_GRACE_S"
DEFAULT_GRACE_S = 60.0  # a normal stop takes 1-3 s; a slow tracking server gets its retries

_grace_s: float | None = None  # set by an entry point; None: never armed
_timer: threading.Timer | None = None


def enable_stop_deadline() -> None:
    """Read the grace period (refused in one sentence if it is not a positive number of seconds)."""
    global _grace_s
    raw = os.environ.get(GRACE_ENV, str(DEFAULT_GRACE_S))
    try:
        grace = float(raw)
    except ValueError:
        grace = float("nan")
    if not grace > 0:
        raise ConfigError(f"{GRACE_ENV} must be a positive number of seconds, not {raw!r}.")
    _grace_s = grace


def arm_stop_deadline(signum: int) -> bool:
    """Start the grace period at the first stopping signal (later ones change nothing); True if armed."""
    global _timer
    if _grace_s is None or _timer is not None:
        return False
    grace = _grace_s
    _timer = threading.Timer(grace, _give_up, args=(signum, grace))
    _timer.daemon = True  # a process that ends in time is not kept waiting for it
    _timer.start()
    return True


def _give_up(signum: int, grace: float) -> None:
    sys.stderr.write(f"\nstill running {grace:g} s after {signal.Signals(signum).name}; "
                     "exiting now. Where each thread was:\n")
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
    os._exit(128 + signum)
