"""After a stopping signal an entry point's process ends within the grace period, whatever blocks it."""

import os
import signal
import subprocess
import sys
import time

from tests.helpers.runs import REPO
from lit_modules.tracking import stop_deadline

# A process that, once stopped, blocks forever in its shutdown (as a lock left held would make it).
STUCK = ("import os, signal, threading\n"
         "from lit_modules.tracking.stop_deadline import enable_stop_deadline, arm_stop_deadline\n"
         "def stuck_in_shutdown():\n"
         "    threading.Event().wait()\n"
         "enable_stop_deadline()\n"
         "assert arm_stop_deadline(signal.SIGINT) and not arm_stop_deadline(signal.SIGINT)\n"
         "stuck_in_shutdown()\n")


def test_a_stopped_process_that_hangs_exits_128_plus_signal_and_says_where_it_hung() -> None:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", STUCK], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, stop_deadline.GRACE_ENV: "1"})
    assert done.returncode == 128 + signal.SIGINT
    assert time.monotonic() - start < 30
    assert "still running 1 s after SIGINT" in done.stderr and "stuck_in_shutdown" in done.stderr, done.stderr


def test_without_an_entry_point_nothing_is_armed() -> None:
    assert stop_deadline._grace_s is None  # pytest's own process: train.run called here is never shot down
    assert stop_deadline.arm_stop_deadline(signal.SIGTERM) is False and stop_deadline._timer is None


def test_a_grace_that_is_not_a_positive_number_is_refused_in_one_sentence_before_any_run(tmp_path) -> None:
    runs = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-m", "lit_modules.train", f"runs_dir={runs}"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env={**os.environ, stop_deadline.GRACE_ENV: "soon"})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == f"error: {stop_deadline.GRACE_ENV} must be a positive number of seconds, not 'soon'."
    assert not runs.exists()  # no store, no run
