"""multirun_parent: which multiruns get a parent run, and the status and reason it ends with after its jobs."""

import re
import time

import pytest
from omegaconf import OmegaConf

from lit_modules.tracking.multirun_parent import multirun_parent, needs_parent
from lit_modules.tracking.run_lifecycle import open_run
from tests.helpers.stores import fresh_store

OVERRIDES = ["optim.lr=1e-3,3e-3", "seed=0"]  # the command's overrides, -m left out (lit_modules.train)
COMMAND = "optim.lr=1e-3,3e-3 seed=0"


def jobs(runs_dir, count: int = 2, **fields):
    job = {"dry_run": False, "parent_run_id": None, "runs_dir": str(runs_dir),
           "logger": {"tracking_uri": None, "experiment": "runs"}, **fields}
    return [OmegaConf.create(job) for _ in range(count)]


def child(client, parent: str, status: str, start_time: int | None = None) -> str:
    """A run nested under `parent`, ended with `status`; with `start_time` (ms), one begun then."""
    experiment_id = client.get_run(parent).info.experiment_id
    if start_time is None:
        run_id = open_run(client, experiment_id, None, {}, {}, parent_run_id=parent)
    else:
        run_id = client.create_run(experiment_id, start_time=start_time,
                                   tags={"mlflow.parentRunId": parent}).info.run_id
    client.set_terminated(run_id, status=status)
    return run_id


def test_a_multirun_needs_a_parent_unless_it_names_one_or_is_dry(tmp_path) -> None:
    assert needs_parent(jobs(tmp_path)) is True
    assert needs_parent([]) is False
    assert needs_parent(jobs(tmp_path, dry_run=True)) is False
    assert needs_parent(jobs(tmp_path, parent_run_id="abc")) is False


def test_no_parent_is_yielded_and_no_store_made_when_none_is_needed(tmp_path) -> None:
    with multirun_parent(jobs(tmp_path / "runs", parent_run_id="abc"), OVERRIDES) as parent:
        assert parent is None
    assert not (tmp_path / "runs").exists()


def test_the_parent_records_the_command_and_ends_finished_when_every_job_finished(tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    with multirun_parent(jobs(tmp_path / "runs"), OVERRIDES) as parent:
        assert client.get_run(parent).info.status == "RUNNING"
        child(client, parent, "FINISHED")
        child(client, parent, "FINISHED")
    run = client.get_run(parent)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "runs"
    assert re.fullmatch(r"multirun/\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", run.info.run_name)
    assert run.data.params == {"overrides": COMMAND, "jobs": "2"}
    assert {k: run.data.tags[k] for k in ("multirun.role", "end_reason", "mlflow.note.content")} == {
        "multirun.role": "parent", "end_reason": "completed",
        "mlflow.note.content": f"Hydra multirun of 2 jobs: `{COMMAND}`."}


def test_a_job_that_did_not_finish_fails_the_parent_with_the_count(tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    with multirun_parent(jobs(tmp_path / "runs"), OVERRIDES) as parent:
        child(client, parent, "FINISHED")
        child(client, parent, "FAILED")
    run = client.get_run(parent)
    assert (run.info.status, run.data.tags["end_reason"]) == ("FAILED", "1 of 2 jobs finished")


def test_only_jobs_started_by_this_multirun_count(tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    with multirun_parent(jobs(tmp_path / "runs", count=1), OVERRIDES) as parent:
        child(client, parent, "FINISHED", start_time=int(time.time() * 1000) - 3_600_000)  # begun an hour before
    run = client.get_run(parent)
    assert (run.info.status, run.data.tags["end_reason"]) == ("FAILED", "0 of 1 jobs finished")


@pytest.mark.parametrize("error, status, reason", [
    (KeyboardInterrupt, "KILLED", "interrupted"),
    (RuntimeError, "FAILED", "the multirun stopped before its jobs ended"),
])
def test_a_multirun_stopped_midway_ends_its_parent_and_the_error_goes_on(tmp_path, error, status, reason) -> None:
    client = fresh_store(tmp_path / "runs")
    opened = []
    with pytest.raises(error):
        with multirun_parent(jobs(tmp_path / "runs"), OVERRIDES) as parent:
            opened.append(parent)
            child(client, parent, "FINISHED")
            raise error()
    run = client.get_run(opened[0])
    assert (run.info.status, run.data.tags["end_reason"]) == (status, reason)
