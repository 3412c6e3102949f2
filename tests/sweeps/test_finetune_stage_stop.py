"""A stopped fine-tune stage stops: Ctrl-C starts no further queued job, lets the running one end, and goes on
up as KeyboardInterrupt (the evidence driver records its time and exits 130; the same command resumes)."""

import signal
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from sweeps.finetune_stage import each_in_workers


def _mark(item: tuple[str, str], folder: str) -> str:
    """A job of ~1 s that leaves a file when it starts and another when it ends."""
    (Path(folder) / f"{item[0]}.started").touch()
    time.sleep(1.0)
    (Path(folder) / f"{item[0]}.ended").touch()
    return f"job {item[0]} done"


def test_an_interrupted_pool_runs_no_queued_job_and_lets_the_running_one_end(tmp_path: Path, capsys) -> None:
    items = [(str(i), "x") for i in range(6)]
    main_thread = threading.get_ident()

    def interrupt_once_a_job_runs() -> None:
        while not list(tmp_path.glob("*.started")):
            time.sleep(0.05)
        # as Ctrl-C reaches the driver: to the main thread, so its wait is interrupted at once (a process-wide
        # kill may land on another thread, and the main one only sees it when a job ends)
        signal.pthread_kill(main_thread, signal.SIGINT)

    # Python's own Ctrl-C handler, whatever a test before this one in the same worker process left installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_once_a_job_runs, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            each_in_workers(partial(_mark, folder=str(tmp_path)), items, 1, "fine-tune of")
    finally:
        signal.signal(signal.SIGINT, previous)
    started = {p.stem for p in tmp_path.glob("*.started")}
    ended = {p.stem for p in tmp_path.glob("*.ended")}
    assert started == ended and 1 <= len(started) <= 2  # the running job (and at most the one queued with it) ended
    assert "no further fine-tune starts" in capsys.readouterr().err
