"""`kill -USR2 <pid>` prints where every thread of a run is, without stopping it.

A run that does not stop when asked, or stops making progress, says where it is stuck on stderr (its log).
"""

from __future__ import annotations

import faulthandler
import signal
import sys

DUMP_SIGNAL = signal.SIGUSR2  # SIGUSR1 is Lightning's (SLURM requeue); SIGQUIT would dump core


def enable_stack_dumps() -> None:
    try:
        faulthandler.register(DUMP_SIGNAL, file=sys.stderr, all_threads=True, chain=False)
    except (AttributeError, ValueError, OSError):  # no SIGUSR2 (Windows) or stderr has no file descriptor
        pass
