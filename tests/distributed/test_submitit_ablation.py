"""Ablation cells through Hydra's submitit launcher (the SLURM path, with submitit's local executor), the
grid's bookkeeping on the tracking server: job submission, per-cell logs, one cancelled job, and a rerun
that runs only that cell; the report is uploaded and analysis reads the grid back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.runs import REPO

pytestmark = pytest.mark.distributed

DEADLINE_S = 600


def ablate(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "sweeps.ablate", *args], cwd=REPO, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def cells(client: MlflowClient, experiment: str) -> list:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id]) if exp else []
    return [r for r in runs if "ablation.arm" in r.data.tags and r.data.tags.get("ablation.role") != "parent"]


def test_one_cancelled_cell_job_then_a_rerun_that_runs_only_that_cell(tracking_server, tmp_path: Path) -> None:
    experiment = f"ablate-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_server.url, "PYTHONPATH": str(REPO),
           "LLM_REPORTS_DIR": str(tmp_path / "reports")}
    args = ["experiment=smoke", "seeds=0", "launcher=submitit_local", f"runs_dir={tmp_path / 'runs'}",
            f"logger.experiment={experiment}", "trainer.num_threads=1"]
    client = MlflowClient(tracking_server.url)

    first = ablate(args, env, tmp_path / "first.log")
    try:
        # Cancel one cell's job once its run is training (inside its lifecycle), as scancel would: SIGTERM to
        # the job, whose submitit controller passes it on to the cell.
        deadline = time.monotonic() + DEADLINE_S
        target = None
        while target is None and time.monotonic() < deadline:
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            training = [r for r in cells(client, experiment)
                        if r.info.status == "RUNNING" and "checkpoint_dir" in r.data.tags]
            target = training[0] if training else None
            time.sleep(0.2)
        assert target is not None, "no cell started training"
        os.kill(int(target.data.tags["submitit.job_id"]), signal.SIGTERM)
        assert first.wait(timeout=DEADLINE_S) == 1, (tmp_path / "first.log").read_text()[-3000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)

    after_first = {r.info.run_id: r for r in cells(client, experiment)}
    cancelled = client.get_run(target.info.run_id)
    assert cancelled.info.status == "KILLED"  # a cancelled job is an interrupted run, never FAILED or RUNNING
    (other,) = [r for r in after_first.values() if r.info.run_id != target.info.run_id]
    assert other.info.status == "FINISHED"  # the other cell ran to its end, not cut short by the failure
    parent_id = other.data.tags["mlflow.parentRunId"]
    assert client.get_run(parent_id).info.status == "FAILED"
    # Each cell's job wrote its own log, which its run points at.
    assert f"run {other.info.run_id} finished" in Path(other.data.tags["submitit.stdout"]).read_text()
    assert "Received SIGTERM" in Path(cancelled.data.tags["submitit.stderr"]).read_text()  # the cancel
    assert other.data.tags["submitit.job_id"] != cancelled.data.tags["submitit.job_id"]

    second = subprocess.run([sys.executable, "-m", "sweeps.ablate", *args], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=DEADLINE_S)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    new = [r for r in cells(client, experiment) if r.info.run_id not in after_first]
    (rerun,) = new  # only the cancelled cell ran again
    assert rerun.info.status == "FINISHED"
    assert (rerun.data.tags["ablation.arm"], rerun.data.tags["seed"]) == (
        cancelled.data.tags["ablation.arm"], cancelled.data.tags["seed"])
    assert rerun.data.tags["mlflow.parentRunId"] == parent_id and client.get_run(parent_id).info.status == "FINISHED"

    # The report went up to the parent run, and analysis reads the grid back from the server.
    assert any(a.path.endswith("report.md") for a in client.list_artifacts(parent_id, "report"))
    from analysis.load_runs import RunStore
    from analysis.store_ablation import load_ablation

    store = RunStore(tmp_path / "runs", tracking=tracking_server.url)
    grid = load_ablation(store, store.run(parent_id))
    assert sorted(grid.finished["arm"]) == ["baseline", "no_decay"] and len(grid.runs) == 3
    assert set(grid.curves["run_id"]) == set(grid.finished["run_id"])
