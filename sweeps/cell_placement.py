"""Where an ablation's cells run: worker processes, jobs, several cells on one device, one cell on several devices.

    python -m sweeps.ablate experiment=<preset> cells_per_device=4 [run overrides]   # 4 cells at once per device
    python -m sweeps.ablate experiment=<preset> devices_per_cell=8 [launcher=slurm]   # each cell on 8 devices

`cells_per_device=k`: the device-cells launcher (hydra_plugins/llm_ablate_launchers/device_cells.py) keeps k
cells running on every visible GPU (or k on the CPU), each a process that sees only its device; a small cell
leaves most of a GPU idle, k of them fill it. `devices_per_cell=N`: every cell trains on N devices as N ranks
that torchrun starts (trainer.devices=N, DDP unless the cell asks for FSDP); on this machine through the same
launcher, on SLURM (`launcher=slurm`, or `submitit_local` to try the path here) as one job of N GPUs whose
process starts torchrun. Both pass through `make evidence` as they do through `make ablate`. A cell's losses
depend on its own settings and rank layout, never on how many cells share its device.

`launch_overrides` turns a grid into the multirun's launcher overrides, placed or not.
"""

from __future__ import annotations

import os
from typing import Any

from lit_modules.config.arguments import HYDRA, POSITIVE_INT, Arg, Verb, parse_words
from lit_modules.config.errors import ConfigError
from lit_modules.distributed.ranks import Ranks

ARGS = {"cells_per_device": Arg(POSITIVE_INT), "devices_per_cell": Arg(POSITIVE_INT)}
DEVICE_CELLS = "device_cells"
TORCHRUN_JOB_LAUNCHERS = ("slurm", "submitit_local")  # their jobs start torchrun (cell_launchers.py)
FSDP_WORDS = ("trainer=fsdp", "trainer.strategy=fsdp")


def placed(grid: Any) -> bool:
    """Whether the grid asks for a placement (else the launch is as before); `launcher=device_cells` alone is one
    cell at a time on every visible GPU."""
    return bool(grid.cells_per_device or grid.devices_per_cell or grid.launcher == DEVICE_CELLS)


def multi_device_overrides(devices_per_cell: int | None, overrides: list[str]) -> list[str]:
    """The run overrides that make each cell an N-rank run (none for one device): they are part of every
    cell's config, hence of its hash, identical in the driver and in each rank."""
    n = devices_per_cell or 1
    if n <= 1:
        return []
    fsdp = any(o.lstrip("+") in FSDP_WORDS for o in overrides)
    return [f"trainer.devices={n}", "trainer.num_nodes=1", *([] if fsdp else ["trainer.strategy=ddp"])]


def adopt_words(grid: Any) -> None:
    """`cells_per_device=` / `devices_per_cell=` given among a grid's run overrides (a grid made as data, as the
    evidence driver makes its grids, carries its command's words there): set on the grid and taken out, the
    multi-device overrides added. Nothing happens to a grid without them."""
    words = parse_words(grid.overrides, Verb("ablate", ARGS, rest=HYDRA))
    if not words.given:
        return
    grid.cells_per_device = words["cells_per_device"] or grid.cells_per_device
    grid.devices_per_cell = words["devices_per_cell"] or grid.devices_per_cell
    grid.overrides = [*words.rest, *multi_device_overrides(grid.devices_per_cell, words.rest)]


def cell_ranks(grid: Any) -> Ranks | None:
    """The layout a cell will be validated for: torchrun's N ranks, rank 0's view (None for one device)."""
    n = grid.devices_per_cell or 1
    return Ranks(world_size=n, local_world_size=n) if n > 1 else None


def placement_problem(grid: Any, gpu_cells: bool) -> str | None:
    """One sentence when the placement cannot be made as asked, before any parent run is opened."""
    k, n = grid.cells_per_device, grid.devices_per_cell or 1
    if not placed(grid):
        return None
    if grid.workers:
        return "workers= runs cells in worker processes, cells_per_device=/devices_per_cell= place them on devices; give one."
    if k and grid.launcher not in (None, DEVICE_CELLS):
        return (f"cells_per_device= places cells on this machine's devices, and launcher={grid.launcher} gives each "
                "cell a job of its own; drop one of them.")
    if n > 1 and grid.launcher not in (None, DEVICE_CELLS, *TORCHRUN_JOB_LAUNCHERS):
        return f"devices_per_cell= starts each cell's ranks with torchrun, which launcher={grid.launcher} cannot."
    if gpu_cells and grid.launcher in (None, DEVICE_CELLS):
        from hydra_plugins.llm_ablate_launchers.device_cells import visible_gpus

        visible = len(visible_gpus())
        if n > visible:
            return f"devices_per_cell={n} needs {n} GPUs for one cell, and this machine shows {visible}."
    return None


def placed_launch(grid: Any, threads: int | None, gpu_cells: bool, cells: int) -> list[str]:
    """Hydra launcher overrides for a placed grid, with CPU threads shared among the processes running at once."""
    k, n = grid.cells_per_device or 1, grid.devices_per_cell or 1
    cores = os.cpu_count() or 1
    if grid.launcher in TORCHRUN_JOB_LAUNCHERS:  # one job per cell, its N ranks started by torchrun in the job
        gpus = [f"hydra.launcher.gpus_per_node={n}"] if gpu_cells else []
        shared = grid.launcher == "submitit_local" and not threads  # every job at once on this machine's cores
        add = "+" if grid.launcher == "submitit_local" else ""  # its schema is the plugin's (cell_launchers.py)
        return [f"hydra/launcher={grid.launcher}", f"{add}hydra.launcher.nproc_per_cell={n}", *gpus,
                *([f"trainer.num_threads={max(1, cores // (cells * n))}"] if shared else [])]
    devices = 1
    if gpu_cells:
        from hydra_plugins.llm_ablate_launchers.device_cells import visible_gpus

        devices = max(1, len(visible_gpus()) // n)
    processes = min(cells, k * devices) * n  # cells at once, each with its ranks
    extra = [] if threads else [f"trainer.num_threads={max(1, cores // processes)}"]
    return [f"hydra/launcher={DEVICE_CELLS}", f"hydra.launcher.accelerator={'gpu' if gpu_cells else 'cpu'}",
            f"hydra.launcher.cells_per_device={k}", f"hydra.launcher.nproc_per_cell={n}", *extra]


def launch_overrides(grid: Any, threads: int | None, gpu_cells: bool = False, cells: int | None = None) -> list[str]:
    """Hydra launcher overrides: a placement as above; an explicit launcher as given; else local worker processes
    x threads (for `cells` cells: the grid's unless given). GPU cells (e.g. recipe=<size>) run one after another
    unless workers= or a placement says: each wants its GPUs to itself."""
    cores = os.cpu_count() or 1
    cells = grid.cells() if cells is None else cells
    if placed(grid):
        return placed_launch(grid, threads, gpu_cells, cells)
    if gpu_cells and not grid.workers and not grid.launcher:
        return []
    if grid.launcher == "submitit_local":  # every cell at once on this machine, sharing its cores
        return [f"hydra/launcher={grid.launcher}", *([] if threads else [f"trainer.num_threads={max(1, cores // cells)}"])]
    if grid.launcher and grid.launcher != "local_parallel":
        return [f"hydra/launcher={grid.launcher}"]  # e.g. slurm: the cluster decides
    workers = min(grid.workers or max(1, cores // (threads or 1)), cells)
    if workers <= 1:
        return []  # Hydra's basic launcher: cells one after another in one process
    extra = [] if threads else [f"trainer.num_threads={max(1, cores // workers)}"]
    return ["hydra/launcher=local_parallel", f"hydra.launcher.n_jobs={workers}", *extra]


def check_placement(grid: Any, gpu_cells: bool) -> None:
    problem = placement_problem(grid, gpu_cells)
    if problem:
        raise ConfigError(problem)
