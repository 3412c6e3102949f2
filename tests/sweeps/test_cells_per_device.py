"""cells_per_device=k: k cells at once on one device (here the CPU, k = 2), each its own process that the run
records on that device; the launch it asks for, and the combinations refused in one sentence."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hydra_plugins.llm_ablate_launchers.device_cells import slots
from sweeps.ablate import Grid, launch_overrides
from sweeps.ablate import main as ablate_main
from sweeps.ablate import parse_args
from tests.helpers.runs import all_runs


def _places(devices: list[str], k: int, nproc: int) -> list[tuple]:
    # Compared as values: Hydra's plugin scan executes the launcher's module again, so its classes are new ones.
    return [(slot.devices, slot.place) for slot in slots(devices, k, nproc)]


def test_slots_fill_every_device_before_doubling_up() -> None:
    assert _places(["0", "1"], 2, 1) == [(("0",), 0), (("1",), 0), (("0",), 1), (("1",), 1)]
    assert _places(["0", "1", "2", "3", "4"], 1, 2) == [(("0", "1"), 0), (("2", "3"), 0)]  # "4" left over
    assert _places(["cpu"], 2, 4) == [(("cpu",), 0), (("cpu",), 1)]  # every rank of a cell shares the CPU


def test_the_launch_a_placement_asks_for(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    grid = Grid(experiment="smoke", arms=["a", "b"], seeds=["0", "1"], cells_per_device=2)
    assert launch_overrides(grid, None) == [
        "hydra/launcher=device_cells", "hydra.launcher.accelerator=cpu", "hydra.launcher.cells_per_device=2",
        "hydra.launcher.nproc_per_cell=1", "trainer.num_threads=4"]  # 2 cells at once share the 8 cores
    monkeypatch.setattr("hydra_plugins.llm_ablate_launchers.device_cells.visible_gpus", lambda: ["0", "1"])
    assert launch_overrides(grid, None, gpu_cells=True)[:4] == [
        "hydra/launcher=device_cells", "hydra.launcher.accelerator=gpu", "hydra.launcher.cells_per_device=2",
        "hydra.launcher.nproc_per_cell=1"]
    assert launch_overrides(grid, None, gpu_cells=True)[4] == "trainer.num_threads=2"  # 2 GPUs x 2 cells
    every_gpu = Grid(experiment="smoke", arms=["a", "b"], seeds=["0", "1"], launcher="device_cells")
    assert launch_overrides(every_gpu, 1, gpu_cells=True) == [  # one cell per GPU, on every GPU
        "hydra/launcher=device_cells", "hydra.launcher.accelerator=gpu", "hydra.launcher.cells_per_device=1",
        "hydra.launcher.nproc_per_cell=1"]
    wide = Grid(experiment="smoke", arms=["a"], seeds=["0"], devices_per_cell=8, launcher="slurm")
    assert launch_overrides(wide, None, gpu_cells=True) == [
        "hydra/launcher=slurm", "hydra.launcher.nproc_per_cell=8", "hydra.launcher.gpus_per_node=8"]


def test_a_multi_device_cell_is_an_n_rank_run_of_its_own_strategy() -> None:
    assert parse_args(["experiment=smoke", "devices_per_cell=2"]).overrides == [
        "trainer.devices=2", "trainer.num_nodes=1", "trainer.strategy=ddp"]
    assert parse_args(["experiment=smoke", "devices_per_cell=4", "trainer=fsdp"]).overrides == [
        "trainer=fsdp", "trainer.devices=4", "trainer.num_nodes=1"]
    assert parse_args(["experiment=smoke", "devices_per_cell=1"]).overrides == []


@pytest.mark.parametrize("words, sentence", [
    (["cells_per_device=2", "workers=2"], "workers= runs cells in worker processes"),
    (["cells_per_device=2", "launcher=submitit_local"], "cells_per_device= places cells on this machine's devices, "
                                                         "and launcher=submitit_local gives each cell a job"),
    (["devices_per_cell=2", "launcher=local_parallel"], "devices_per_cell= starts each cell's ranks with torchrun, "
                                                         "which launcher=local_parallel cannot."),
    (["cells_per_device=0"], "cells_per_device=0 must be a positive integer."),
])
def test_what_cannot_be_placed_is_one_sentence_before_any_run(words, sentence, runs_dir: Path, capsys) -> None:
    assert ablate_main(["experiment=smoke", *words, f"runs_dir={runs_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and sentence in err[0]
    assert not runs_dir.exists()


def test_two_cells_train_at_once_on_one_device(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    assert ablate_main(["experiment=smoke", "arms=baseline", "seeds=0,1", "cells_per_device=2", "report=false",
                        "trainer.max_steps=12", "trainer.num_threads=1", f"runs_dir={runs_dir}"]) == 0
    cells = [r for r in all_runs(runs_dir) if "ablation.arm" in r.data.tags and r.data.tags.get("ablation.role") != "parent"]
    assert sorted(r.data.tags["seed"] for r in cells) == ["0", "1"] and {r.info.status for r in cells} == {"FINISHED"}
    assert {r.data.tags["cell.devices"] for r in cells} == {"cpu"}  # the one device ...
    assert sorted(r.data.tags["cell.slot"] for r in cells) == ["cpu#0", "cpu#1"]  # ... both of its places
    (placement_file,) = runs_dir.glob("multirun/*/*/.cells/placement.json")
    placement = json.loads(placement_file.read_text())
    assert [p["devices"] for p in placement.values()] == [["cpu"], ["cpu"]]
    assert {p["returncode"] for p in placement.values()} == {0} and len({p["pid"] for p in placement.values()}) == 2
    first, second = placement.values()
    assert first["start"] < second["end"] and second["start"] < first["end"]  # two processes alive at once
    for cell in cells:  # each run trained inside its own process's lifetime, and logged there
        lived = placement[str(int(cell.data.tags["cell.log"].rsplit("/", 1)[1].split(".")[0]))]
        assert lived["start"] * 1000 <= cell.info.start_time <= cell.info.end_time <= lived["end"] * 1000
        assert Path(cell.data.tags["cell.log"]).is_file()


def test_a_slurm_cell_job_starts_torchrun_and_submitit_gets_none_of_our_settings(monkeypatch, tmp_path: Path) -> None:
    """What a SLURM job does with devices_per_cell=8, short of a cluster: submitit's executor and the job's
    command recorded instead of run."""
    import submitit
    from omegaconf import OmegaConf

    from hydra_plugins.llm_ablate_launchers.cell_launchers import SlurmCellLauncher

    seen: dict = {}

    class Executor:  # records what the launcher hands submitit
        def __init__(self, cluster: str, **init) -> None:
            seen["cluster"], seen["init"] = cluster, init

        def update_parameters(self, **params) -> None:
            seen["params"] = params

        def map_array(self, fn, *args) -> list:
            return []

    monkeypatch.setattr(submitit, "AutoExecutor", Executor)
    launcher = SlurmCellLauncher(submitit_folder=str(tmp_path / "%j"), nproc_per_cell=8, gpus_per_node=8,
                                 partition="gpu", max_num_timeout=0)
    launcher.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(tmp_path)}}})
    launcher._submit([["seed=0"]], 0)
    assert seen["cluster"] == "slurm" and seen["params"]["gpus_per_node"] == 8
    assert not any("nproc" in key for key in seen["params"])  # sbatch would refuse a key it does not know

    commands = []
    monkeypatch.setattr("subprocess.run", lambda command: commands.append(command) or SimpleNamespace(returncode=0))
    launcher(["seed=0", "+arm=smoke/baseline"], "hydra.sweep.dir", 3, "job_id_for_3", {})
    assert commands == [[sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=8",
                         "-m", "lit_modules.train", "seed=0", "+arm=smoke/baseline"]]
    monkeypatch.setattr("subprocess.run", lambda command: SimpleNamespace(returncode=1))
    with pytest.raises(RuntimeError, match="cell #3: torchrun's 8 ranks exited with code 1"):
        launcher(["seed=0"], "hydra.sweep.dir", 3, "job_id_for_3", {})


def test_a_cell_wider_than_the_machine_is_refused(monkeypatch) -> None:
    from sweeps.cell_placement import placement_problem

    monkeypatch.setattr("hydra_plugins.llm_ablate_launchers.device_cells.visible_gpus", lambda: ["0", "1"])
    wide = Grid(experiment="smoke", arms=["a"], seeds=["0"], devices_per_cell=8)
    assert placement_problem(wide, gpu_cells=True) == "devices_per_cell=8 needs 8 GPUs for one cell, and this machine shows 2."
    assert placement_problem(Grid(experiment="smoke", arms=["a"], seeds=["0"], devices_per_cell=2), gpu_cells=True) is None
    assert placement_problem(wide, gpu_cells=False) is None  # CPU ranks share the CPU


def test_a_grid_made_as_data_takes_its_placement_from_its_overrides() -> None:
    """The evidence driver hands the ablation driver grids it made, with its command's words as run overrides."""
    from sweeps.ablate import validate_cells

    grid = Grid(experiment="smoke", arms=["smoke/baseline"], seeds=["0"],
                overrides=["cells_per_device=2", "devices_per_cell=2", "trainer.max_steps=5"])
    validate_cells(grid)
    assert (grid.cells_per_device, grid.devices_per_cell) == (2, 2)
    assert grid.overrides == ["trainer.max_steps=5", "trainer.devices=2", "trainer.num_nodes=1", "trainer.strategy=ddp"]
    assert grid.first_config.trainer.devices == 2
    plain = Grid(experiment="smoke", arms=["smoke/baseline"], seeds=["0"], overrides=["trainer.max_steps=5"])
    validate_cells(plain)
    assert plain.overrides == ["trainer.max_steps=5"] and plain.cells_per_device is None
