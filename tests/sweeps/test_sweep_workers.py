"""The driver's other workers start before its set-up and wait for its parent run; a refusal stops them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lit_modules.config.errors import ConfigError
from sweeps.sweep_workers import await_parent, stop_workers


def test_a_waiting_worker_gets_the_parent_once_the_driver_records_it():
    answers = iter([ConfigError("no study yet"), RuntimeError("schema being created"), "parent-123"])

    def lookup() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert await_parent(lookup, poll_s=0.0) == "parent-123"


def test_a_storage_that_keeps_failing_is_raised_not_waited_on_forever():
    def lookup() -> str:
        raise RuntimeError("storage down")

    with pytest.raises(RuntimeError, match="storage down"):
        await_parent(lookup, poll_s=0.0)


def test_stopping_ends_the_waiting_workers():
    waiting = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) for _ in range(2)]
    stop_workers(waiting)
    assert all(p.returncode is not None for p in waiting)


def test_a_refused_two_worker_sweep_leaves_no_worker_behind(tmp_path, capsys, monkeypatch):
    import sweeps.optuna_sweep as driver

    spawned: list[subprocess.Popen] = []
    real = driver.spawn_workers

    def recorded(argv, workers):
        spawned.extend(real(argv, workers))
        return spawned

    monkeypatch.setattr(driver, "spawn_workers", recorded)
    code = driver.main(["sweep=lr_wd", "sweep.workers=2", f"sweep.runs_dir={tmp_path}", "optim.lr=-1"])
    assert code == 2 and "error:" in capsys.readouterr().err
    assert len(spawned) == 1 and spawned[0].returncode is not None


def test_the_driver_starts_its_workers_before_importing_the_training_stack():
    """The second worker's first trial started ~4 s after the first because the driver
    imported Lightning, MLflow and Optuna (~8 s of CPU) before spawning it. Spawning comes first now."""
    probe = (
        "import sys\n"
        "import sweeps.optuna_sweep as entry\n"
        "def spy(argv, workers):\n"
        "    heavy = [m for m in ('torch', 'lightning', 'mlflow', 'optuna', 'sqlalchemy') if m in sys.modules]\n"
        "    print('workers', workers, 'after', ','.join(heavy) or 'nothing heavy')\n"
        "    raise SystemExit(0)\n"
        "entry.spawn_workers = spy\n"
        "entry.main(['sweep=lr_wd', 'sweep.workers=2'])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "workers 2 after nothing heavy"
