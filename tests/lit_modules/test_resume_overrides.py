"""A resume may repeat the command line that started the run: a group choice (trainer=...) and the store's
URL are compared without the settings a resume may change, so the same command plus resume= continues."""

from pathlib import Path

from tests.helpers.runs import all_runs, tiny_overrides
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config


def test_the_same_command_with_a_trainer_group_and_resume_continues_the_run(runs_dir: Path) -> None:
    command = ["trainer=cpu", *tiny_overrides(runs_dir, steps=10, **{"trainer.num_threads": "1"})]
    first = run(compose_run_config([*command, "trainer.stop_after_steps=5"]))
    assert first.status == "KILLED"
    again = [*command, f"resume={first.run_id}"]
    second = run(compose_run_config(again), cli_overrides=again)
    assert (second.run_id, second.status) == (first.run_id, "FINISHED")
    assert [r.info.status for r in all_runs(runs_dir)] == ["FINISHED"]
