"""`kill -USR2 <pid>` makes a process that enabled stack dumps print every thread's stack and go on."""

import signal
import subprocess
import sys
import time

from tests.helpers.runs import REPO

CHILD = ("from lit_modules.stack_dumps import enable_stack_dumps\n"
         "import time\n"
         "def waiting_here():\n"
         "    print('ready', flush=True)\n"
         "    time.sleep(60)\n"
         "enable_stack_dumps(); waiting_here()\n")


def test_sigusr2_prints_where_the_process_is_and_leaves_it_running() -> None:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGUSR2)
        time.sleep(1)
        assert proc.poll() is None  # still running
    finally:
        proc.kill()
    _, err = proc.communicate(timeout=30)
    assert "waiting_here" in err and "Current thread" in err, err
