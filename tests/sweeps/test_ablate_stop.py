"""Stopping the ablation driver (SIGTERM, Ctrl-C) stops every cell and worker process it started, and the
grid's parent run ends KILLED; the same command later resumes the grid."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.runs import REPO, all_runs
from lit_modules.tracking.store import store_lock
from tests.helpers.processes import process_table, started_by, still_running, wait_for

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")


# 56 s on a fast 2-core host (two workers started, then stopped): make test-slow, to keep make test under
# 10 minutes; make test still runs the ablation verb end to end (test_optuna_sweep, test_ablate_failures).
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_stopping_the_driver_stops_its_cells_and_workers(tmp_path: Path, signum: int) -> None:
    runs_dir = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen(
        [sys.executable, "-m", "sweeps.ablate", "experiment=smoke", f"runs_dir={runs_dir}", "workers=2",
         "report=false", "trainer.max_steps=100000"],  # cells that would train for a long time
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def a_cell_trains() -> bool:
        if not (runs_dir / "mlflow.db").is_file():
            return False
        with store_lock(f"sqlite:///{(runs_dir / 'mlflow.db').resolve()}"):  # the driver may be creating it
            runs = all_runs(runs_dir)
        return any(r.info.status == "RUNNING" and r.data.tags.get("ablation.role") != "parent" for r in runs)

    try:
        wait_for(a_cell_trains, 180, "a cell started training")
        processes = started_by(driver.pid, process_table())
        sessions = {info["sid"] for pid, info in process_table().items() if pid in processes}
        assert len(processes) >= 3  # the multirun, its worker processes
        driver.send_signal(signum)
        _, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode == 128 + signum
    assert "stopped by" in err
    time.sleep(0.5)
    assert still_running(processes, sessions - {os.getsid(0)}) == {}
    runs = all_runs(runs_dir)
    parent = [r for r in runs if r.data.tags.get("ablation.role") == "parent"]
    assert [p.info.status for p in parent] == ["KILLED"]
    assert not [r for r in runs if r.info.status == "RUNNING"]
