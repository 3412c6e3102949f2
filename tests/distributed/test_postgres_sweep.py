"""Optuna on PostgreSQL, with workers that share nothing but the database URL (and the tracking server):
exact totals with a worker SIGKILLed mid-trial, stale-heartbeat retry, pruning, resume, masked password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.runs import REPO
from tests.helpers.recorded import places_holding, recorded_texts
from sweeps.study_driver import PARENT_ATTR
from sweeps.optuna_sweep import main as sweep_main

pytestmark = pytest.mark.distributed

FAST = ["trainer.max_steps=20", "trainer.val_every_n_steps=10", "data.seq_len=64", "data.batch_size=8",
        "data.val_batches=4", "trainer.num_threads=1"]
DEADLINE_S = 600
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def sweep_args(storage: str, runs_dir: Path, study: str, *extra: str) -> list[str]:
    return ["sweep=lr_wd", f"sweep.storage={storage}", f"sweep.study_name={study}", f"sweep.experiment={study}",
            f"sweep.runs_dir={runs_dir}", "sweep.heartbeat_interval=1", "sweep.grace_period=4", *FAST, *extra]


def wait_for(condition, what: str, processes: list[subprocess.Popen], timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        for process in processes:
            assert process.poll() is None, f"a sweep process exited (code {process.returncode}) before {what}"
        time.sleep(0.5)
    raise AssertionError(f"no {what} within {timeout_s:g} s")


def start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    # Its own session: SIGKILL to the group ends the worker and nothing else.
    return subprocess.Popen([sys.executable, "-m", "sweeps.optuna_sweep", *args], cwd=REPO, env=env,
                            stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def test_two_workers_with_one_killed_mid_trial_finish_exactly_the_total(optuna_storage, postgres, tracking_server,
                                                                         tmp_path: Path) -> None:
    study_name, runs_dir = f"pg-{uuid.uuid4().hex[:8]}", tmp_path / "runs"
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_server.url, "PYTHONPATH": str(REPO)}
    args = sweep_args(optuna_storage, runs_dir, study_name, "sweep.n_trials=3")
    study = lambda: optuna.load_study(study_name=study_name, storage=optuna_storage)  # noqa: E731
    client = MlflowClient(tracking_server.url)
    driver = start(args, tmp_path / "driver.log", env)
    worker = None
    try:
        wait_for(lambda: _has_parent(optuna_storage, study_name), "study with its parent run", [driver])
        # The second worker, started by hand like one on another machine, trains far too long to finish
        # before it is killed (however fast the machine); its trial is retried with the driver's settings.
        worker = start([*args, "--worker", "trainer.max_steps=1000000", "trainer.val_every_n_steps=1000"],
                       tmp_path / "worker.log", env)
        long_trial = lambda: next((t for t in study().get_trials(states=(optuna.trial.TrialState.RUNNING,))  # noqa: E731
                                   if "mlflow_run_id" in t.user_attrs and client.get_run(
                                       t.user_attrs["mlflow_run_id"]).data.params.get("trainer.max_steps") == "1000000"),
                                  None)
        killed = wait_for(long_trial, "RUNNING trial of the second worker", [driver, worker])
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
        assert driver.wait(timeout=DEADLINE_S) == 0, (tmp_path / "driver.log").read_text()[-3000:]
    finally:
        for process in (driver, worker):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)

    trials = study().get_trials()
    finished = [t for t in trials if t.state in FINISHED]
    states = Counter(t.state.name for t in trials)
    assert len(finished) == 3 and states["FAIL"] == 1 and set(states) <= {"COMPLETE", "PRUNED", "FAIL"}, states
    (failed,) = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    assert failed.number == killed.number  # only the killed worker's trial failed ...
    (retry,) = [t for t in finished if t.system_attrs.get("failed_trial") == killed.number]
    assert retry.params == killed.params  # ... and it was retried once, with its parameters
    assert len({tuple(sorted(t.params.items())) for t in finished}) == 3  # no trial ran twice

    experiment = client.get_experiment_by_name(study_name)
    runs = client.search_runs([experiment.experiment_id])
    (parent,) = [r for r in runs if r.data.tags.get("sweep.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("sweep.role") == "trial"]
    assert parent.info.status == "FINISHED" and study().user_attrs[PARENT_ATTR] == parent.info.run_id
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert Counter(c.data.tags["sweep.trial_number"] for c in children) == Counter(str(t.number) for t in trials)
    orphan = client.get_run(killed.user_attrs["mlflow_run_id"])
    assert orphan.info.status == "KILLED" and orphan.data.tags["end_reason"] == "worker died (no heartbeat)"
    assert sorted(c.info.status for c in children) == ["FINISHED"] * states["COMPLETE"] + ["KILLED"] * (
        states["PRUNED"] + 1)
    assert {"summary/summary.md", "summary/trials.csv"} <= {
        a.path for a in client.list_artifacts(parent.info.run_id, "summary")}

    # Totals count earlier invocations: the same command again runs nothing.
    again = subprocess.run([sys.executable, "-m", "sweeps.optuna_sweep", *args], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=DEADLINE_S)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "3/3 trials finished so far" in again.stdout and len(study().get_trials()) == len(trials)

    # The storage URL's password is in no output, param, tag or artifact; the recorded URL is masked.
    outputs = [("driver output", (tmp_path / "driver.log").read_text()),
               ("worker output", (tmp_path / "worker.log").read_text()),
               ("rerun output", again.stdout + again.stderr)]
    assert places_holding(postgres.password, [*outputs, *recorded_texts(client, [experiment.experiment_id])]) == []
    assert client.get_run(parent.info.run_id).data.params["sweep.storage"] == optuna_storage.replace(
        postgres.password, "***")
    assert "storage postgresql+psycopg://llm_ablate:***@127.0.0.1" in outputs[0][1]


def _has_parent(storage: str, study_name: str) -> bool:
    try:
        return PARENT_ATTR in optuna.load_study(study_name=study_name, storage=storage).user_attrs
    except KeyError:  # the driver has not created the study yet
        return False


def test_pruning_and_a_larger_total_on_postgres(optuna_storage, tracking_server, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_server.url)
    study_name = f"prune-{uuid.uuid4().hex[:8]}"
    study = optuna.create_study(study_name=study_name, storage=optuna_storage, direction="minimize")
    # A good and then a hopeless learning rate: the median of the first prunes the second at its first report.
    study.enqueue_trial({"optim.lr": 2e-2, "optim.weight_decay": 0.1})
    study.enqueue_trial({"optim.lr": 1e-3, "optim.weight_decay": 0.1})
    args = sweep_args(optuna_storage, tmp_path / "runs", study_name, "sweep.pruner.n_startup_trials=1",
                      "sweep.pruner.n_warmup_steps=0")
    assert sweep_main([*args, "sweep.n_trials=2"]) == 0
    trials = optuna.load_study(study_name=study_name, storage=optuna_storage).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED"]
    assert trials[1].intermediate_values and max(trials[1].intermediate_values) < 19  # stopped early
    pruned = MlflowClient(tracking_server.url).get_run(trials[1].user_attrs["mlflow_run_id"])
    assert pruned.info.status == "KILLED" and pruned.data.tags["end_reason"].startswith("pruned at step")

    assert sweep_main([*args, "sweep.n_trials=3"]) == 0  # one more, not three more
    assert len(optuna.load_study(study_name=study_name, storage=optuna_storage).get_trials()) == 3


def test_a_worker_cannot_join_a_sweep_that_does_not_exist(optuna_storage, postgres, tracking_server,
                                                          tmp_path: Path) -> None:
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_server.url, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "sweeps.optuna_sweep", *sweep_args(optuna_storage, tmp_path / "runs", "nobody"),
         "--worker"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: There is no sweep 'nobody' in {optuna_storage.replace(postgres.password, '***')} to join yet; "
        "start its driver first (make sweep ...), then the workers."]
    assert optuna.get_all_study_names(optuna_storage) == []  # nothing was created
