"""A Hydra sweeper that runs a given list of cells, each its own overrides, as one multirun.

`hydra/sweeper=cell_list hydra.sweeper.cells_file=<json>`: the file holds a list of cells, each a list of
override strings; every job is the command line's overrides followed by its cell's. The ablation driver
uses it to run cells that no Cartesian product describes (each tuned arm at its own rate, blocks with their
own seeds) in ONE launch: the worker processes start once, and a free worker takes the next cell, where one
launch per arm paid ~15-20 s of start-up each and left a worker idle at every launch's end.

The driver has composed and validated every cell before it writes the file, so, unlike the basic sweeper,
this one does not compose each job again before launching.
"""


import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


@dataclass
class CellListSweeperConf:
    _target_: str = "hydra_plugins.llm_ablate_launchers.cell_list_sweeper.CellListSweeper"
    cells_file: str = "???"
    # A preset's grid (hydra.sweeper.params) is the basic sweeper's; the cell list replaces it.
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="cell_list", node=CellListSweeperConf)


def write_cells(cells: list[list[str]]) -> str:
    """A temporary cells file for `hydra.sweeper.cells_file` (its writer removes it when the launch ends)."""
    import os
    import tempfile

    handle, path = tempfile.mkstemp(prefix="ablate-cells-", suffix=".json")
    with os.fdopen(handle, "w") as f:
        json.dump(cells, f)
    return path


def read_cells(path: str | Path) -> list[list[str]]:
    cells = json.loads(Path(path).read_text())
    if not isinstance(cells, list) or not all(isinstance(c, list) and all(isinstance(o, str) for o in c) for c in cells):
        raise ValueError(f"{path} is not a list of cells, each a list of override strings")
    return cells


class CellListSweeper(Sweeper):
    def __init__(self, cells_file: str, params: Optional[Dict[str, str]] = None) -> None:
        super().__init__()
        self.cells_file = cells_file
        self.config: Optional[DictConfig] = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from hydra.core.plugins import Plugins

        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        jobs = [[*arguments, *cell] for cell in read_cells(self.cells_file)]
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        (sweep_dir / "cells.json").write_text(json.dumps(jobs, indent=1))  # what ran: the file given is temporary
        results = self.launcher.launch(jobs, initial_job_idx=0) if jobs else []
        for result in results:
            _ = result.return_value  # raises for a job that failed, as the basic sweeper does
        return [results]
