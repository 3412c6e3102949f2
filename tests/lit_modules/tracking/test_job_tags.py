"""A run started by a scheduler job records the job, and where a submitit job's log is."""

from pathlib import Path

from lit_modules.tracking.job_tags import scheduler_tags


def test_no_scheduler_no_tags() -> None:
    assert scheduler_tags({}) == {}


def test_a_slurm_array_task_is_named() -> None:
    env = {"SLURM_JOB_ID": "4242", "SLURM_ARRAY_JOB_ID": "4240", "SLURM_ARRAY_TASK_ID": "2", "SLURMD_NODENAME": "gpu07"}
    assert scheduler_tags(env) == {"slurm.job_id": "4242", "slurm.array_job": "4240_2", "slurm.node": "gpu07"}


def test_a_submitit_job_points_at_its_own_log_files(tmp_path: Path, monkeypatch) -> None:
    env = {"SUBMITIT_EXECUTOR": "local", "SUBMITIT_FOLDER": str(tmp_path / ".submitit" / "%j"),
           "SUBMITIT_LOCAL_JOB_ID": "31337", "SUBMITIT_LOCAL_GLOBALID": "0"}
    for key, value in env.items():  # submitit.JobEnvironment reads os.environ
        monkeypatch.setenv(key, value)
    tags = scheduler_tags(env)
    assert tags["submitit.job_id"] == "31337"
    assert tags["submitit.stdout"] == str(tmp_path / ".submitit" / "31337" / "31337_0_log.out")
    assert tags["submitit.stderr"] == str(tmp_path / ".submitit" / "31337" / "31337_0_log.err")
