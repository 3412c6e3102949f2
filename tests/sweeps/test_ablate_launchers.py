"""The ablation driver's launchers: submitit on this machine shares the cores; an unknown one is refused."""

from pathlib import Path

from tests.helpers.runs import all_runs
from sweeps.ablate import Grid, launch_overrides
from sweeps.ablate import main as ablate_main


def test_submitit_local_runs_every_cell_at_once_with_the_cores_shared(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    grid = Grid(experiment="smoke", arms=["a", "b"], seeds=["0", "1"], launcher="submitit_local")
    assert launch_overrides(grid, None) == ["hydra/launcher=submitit_local", "trainer.num_threads=2"]
    assert launch_overrides(grid, 3) == ["hydra/launcher=submitit_local"]  # the preset's own thread count


def test_an_unknown_launcher_is_one_sentence_before_anything_exists(runs_dir: Path, capsys) -> None:
    assert ablate_main(["experiment=smoke", "launcher=slrum", f"runs_dir={runs_dir}"]) == 2
    err = capsys.readouterr().err
    assert "launcher=slrum is not in conf/hydra/launcher/" in err and "slurm" in err and "submitit_local" in err
    assert not runs_dir.exists() and all_runs(runs_dir) == []


def test_slurm_where_there_is_no_slurm_is_one_sentence_before_the_parent_run(runs_dir: Path, capsys,
                                                                             monkeypatch) -> None:
    """submitit found out inside the multirun ("Could not detect srun"), after the grid's parent was open."""
    monkeypatch.setenv("PATH", str(runs_dir.parent / "no-tools"))  # no sbatch, no srun
    assert ablate_main(["experiment=smoke", "launcher=slurm", f"runs_dir={runs_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "launcher=slurm submits cells to SLURM, and this machine has no sbatch or srun" in err[0]
    assert not runs_dir.exists()
