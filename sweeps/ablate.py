"""Ablation grids: a preset's arms x paired seeds, run by Hydra multirun under one MLflow parent run.

    python -m sweeps.ablate experiment=<preset> [arms=a,b] [seeds=2,3] [workers=N] [launcher=slurm]
                            [report=false] [run overrides]

Cells run in parallel on this machine by default: `workers` processes (default: one per core, at most one
per cell) with cores / workers threads each (`trainer.num_threads`, unless the preset or the command line
sets it). A cell's losses depend on its thread count, never on how many cells run beside it, so the same
cells with the same `trainer.num_threads` give the same results sequentially (`workers=1`) and in parallel.

A run override that lists several values (`optim.lr=3e-3,6e-3`) multiplies the grid as in Hydra's multirun:
every arm x seed x value is a cell. Each cell needs its own arm name, so such a grid names its cells by the
value, e.g. `ablation.arm='baseline@lr${rate_text:${optim.lr}}'` (lit_modules/config/resolvers.py).

Cells run as one Hydra multirun whose sweeper is given the list of cells (hydra_plugins/.../cell_list_sweeper.py):
`run_together` takes several grids of one preset (each its own arms, seeds and overrides, e.g. each tuned arm
of an evidence protocol at its own rate) and runs all their cells in that ONE launch, so the worker processes
start once and a free worker takes the next cell, whichever grid it is from.

Cells whose config hash already FINISHED under the parent are skipped (a grid whose every cell finished
launches nothing), so an interrupted grid is
finished by running the same command again. `arms=` keeps only some of the preset's arms (their short
names) and `seeds=` replaces its seed list, e.g. to add seeds to a finished grid: the new cells join the
same parent and the report counts every finished seed. The grid ends with a report (analysis.report).
If any cell failed (Hydra's multirun goes on past it), the parent ends FAILED and the command exits 1,
saying how many cells did not finish and why; the report is written all the same and lists them.
"""

from __future__ import annotations

from lit_modules.quiet import DRIVER_PRINTS_ENV, quiet_libraries  # first: before tqdm is imported

import itertools
import os
import shutil
import sys
import time
from dataclasses import dataclass, field

from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from hydra_plugins.llm_ablate_launchers.cell_list_sweeper import write_cells
from lit_modules.config import files
from lit_modules.config.arguments import FLAG, HYDRA, INTS, NAMES, OPTIONAL_TEXT, POSITIVE_INT, Arg, Verb, parse_words
from lit_modules.config.composition import COMPOSITION_ERRORS, compose_run_config, sweep_forms
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.process_group import Stopped, run_as_group
from lit_modules.runs import tags
from lit_modules.runs.search import ABLATION, children_filter, find_parent, parent_filter, parent_tags
from lit_modules.tracking.run_lifecycle import find_or_open_parent
from lit_modules.tracking.run_owner import end_dead_runs
from lit_modules.tracking.store import get_or_create_experiment, open_client, resolve_tracking_uri, tracking_uri
from lit_modules.runs.store_check import check_store
from lit_modules.runs.uri_masking import mask_password
from sweeps import cell_placement as placement
from sweeps.cell_placement import launch_overrides
from sweeps.evidence.protocol_file import protocol_grid
from sweeps.progress_lines import CellWatcher


@dataclass
class Grid:
    experiment: str
    arms: list[str]
    seeds: list[str]
    launcher: str | None = None
    workers: int | None = None  # None: one per core (at most one per cell)
    report: bool = True  # write the report when the grid finishes
    only_arms: list[str] = field(default_factory=list)  # short arm names from `arms=`
    only_seeds: list[str] = field(default_factory=list)  # from `seeds=`
    overrides: list[str] = field(default_factory=list)
    runs_dir: str = "runs"
    cell_arms: list[str] = field(default_factory=list)  # each cell's ablation.arm per seed (validate_cells)
    cell_hashes: set[str] = field(default_factory=set)  # every cell's config hash, what a finished cell is found by
    skip_finished: bool = True  # ablation.skip_finished of every cell: a finished cell is not run again
    first_config: object = None  # the first cell's validated config (validate_cells): its threads and accelerator
    arm_overrides: dict[str, list[str]] = field(default_factory=dict)  # arm -> its overrides where it has no file
    cells_per_device: int | None = None  # k cells at once on each device (sweeps/cell_placement.py)
    devices_per_cell: int | None = None  # each cell's ranks on N devices, started by torchrun

    def cells(self) -> int:
        return len(self.cell_arms or self.arms) * len(self.seeds)


VERB = Verb(
    "ablate",
    {
        "experiment": Arg(required="Name the preset to ablate: experiment=<name> (see conf/experiment/).", non_empty=True),
        "launcher": Arg(OPTIONAL_TEXT),
        "workers": Arg(POSITIVE_INT),
        "report": Arg(FLAG, default=True),
        "arms": Arg(NAMES),
        "seeds": Arg(INTS),
        "runs_dir": Arg(default="runs", forward=True),  # the cells write there too
        **placement.ARGS,
    },
    aliases={"seed": "seeds"},  # seed=0 or seed=0,1: the same as seeds=
    refused={k: f"{k}= would fight the preset's grid; use arms=<short names> instead." for k in ("+arm", "arm")},
    rest=HYDRA,  # run overrides for every cell
)


def parse_args(argv: list[str]) -> Grid:
    words = parse_words(argv, VERB)
    n = words["devices_per_cell"]  # each cell an N-rank run: overrides that are part of its config and hash
    return Grid(experiment=words["experiment"], arms=[], seeds=[], launcher=words["launcher"],
                workers=words["workers"], report=words["report"], only_arms=words["arms"] or [],
                only_seeds=words["seeds"] or [], overrides=[*words.rest, *placement.multi_device_overrides(n, words.rest)],
                runs_dir=words["runs_dir"], cells_per_device=words["cells_per_device"], devices_per_cell=n)


SLURM_TOOLS = ("sbatch", "srun")  # what submitit's SLURM launcher calls


def read_grid(grid: Grid) -> None:
    """Arms and seeds come from the preset's hydra.sweeper.params, the same lines multirun expands."""
    if not files.has_option("experiment", grid.experiment):
        raise ConfigError(files.missing_option_sentence("experiment", grid.experiment, "preset"))
    params = OmegaConf.select(files.load_option("experiment", grid.experiment), "hydra.sweeper.params") or {}
    others = sorted(set(params) - {"+arm", "seed"})
    if others:  # the grid is arms x seeds: another swept key would be dropped without a word
        raise ConfigError(f"The preset '{grid.experiment}' sweeps {', '.join(others)} in hydra.sweeper.params; an "
                          "ablation grid sweeps +arm and seed only (give other values on the command line).")
    arms = str(params.get("+arm", "")).split(",") if params.get("+arm") else []
    seeds = [s.strip() for s in str(params.get("seed", "0")).split(",")]
    if not arms:  # an evidence protocol's run preset: the protocol's cells (sweeps/evidence/protocol_file.py)
        arms, seeds, grid.arm_overrides = protocol_grid(grid.experiment)
    grid.arms, grid.seeds = [a.strip() for a in arms], seeds
    if grid.launcher and not files.has_option("hydra/launcher", grid.launcher):
        known = ", ".join(files.options("hydra/launcher"))
        raise ConfigError(f"launcher={grid.launcher} is not in conf/hydra/launcher/ (known: {known}).")
    missing = [tool for tool in SLURM_TOOLS if shutil.which(tool) is None] if grid.launcher == "slurm" else []
    if missing:  # submitit finds out only inside the multirun, after the grid's parent run is open
        raise ConfigError(f"launcher=slurm submits cells to SLURM, and this machine has no {' or '.join(missing)} "
                          "(not a SLURM login node); run it there, or use launcher=submitit_local or no launcher.")
    if grid.only_arms:
        short = {a.rsplit("/", 1)[-1]: a for a in grid.arms}
        unknown = [a for a in grid.only_arms if a not in short]
        if unknown:
            raise ConfigError(
                f"The preset '{grid.experiment}' has no arm {', '.join(unknown)} (its arms: {', '.join(short)})."
            )
        grid.arms = [short[a] for a in grid.only_arms]
    if grid.only_seeds:
        grid.seeds = grid.only_seeds


def arm_words(grid: Grid, arm: str) -> list[str]:
    """The overrides that make an arm's cells: its file (`+arm=<arm>`), or a protocol's overrides for it."""
    return grid.arm_overrides.get(arm) or [f"+arm={arm}"]


def validate_cells(grid: Grid) -> str:
    """Every arm, at every value of a swept override, must compose and validate before anything runs, and
    each of them name a cell of its own (grid.cell_arms); returns the MLflow experiment name."""
    placement.adopt_words(grid)  # a grid made as data carries cells_per_device=/devices_per_cell= among its overrides
    fixed, swept = sweep_forms(grid.overrides)
    name, cell_of = "", {}
    for arm in grid.arms:
        for values in itertools.product(*swept):
            cfg = validate(compose_run_config([f"experiment={grid.experiment}", *arm_words(grid, arm), *fixed, *values]),
                           ranks=placement.cell_ranks(grid))  # as torchrun's rank 0 will, for devices_per_cell=
            name = cfg.logger.experiment
            if grid.first_config is None:
                grid.first_config = cfg.copy()
            if not cfg.ablation.arm:
                raise ConfigError(f"The arm file conf/arm/{arm}.yaml does not set ablation.arm.")
            cell = " ".join([arm.rsplit("/", 1)[-1], *values])
            if cfg.ablation.arm in cell_of:
                raise ConfigError(f"{cell_of[cfg.ablation.arm]} and {cell} would both be the cell `{cfg.ablation.arm}`; "
                                  "name each cell by its swept value, e.g. "
                                  "ablation.arm='<arm>@lr${rate_text:${optim.lr}}'.")
            cell_of[cfg.ablation.arm] = cell
            grid.cell_hashes |= {_config_hash(cfg, seed) for seed in grid.seeds}
            grid.skip_finished = grid.skip_finished and bool(cfg.ablation.skip_finished)
    grid.cell_arms = list(cell_of)
    return name


def _config_hash(cfg, seed: str) -> str:
    """The config hash the cell of this validated config and seed records (lit_modules/training_run.py)."""
    from lit_modules.config.identity import identity_of
    from lit_modules.tracking.repro import config_hash

    cfg.seed = int(seed)
    return config_hash(identity_of(OmegaConf.to_container(cfg, resolve=True)))


def _launch_wide(override: str) -> bool:
    """An override of the launch itself (runs_dir, which the sweep folder derives from; Hydra's own settings):
    it goes on the multirun's command line, not into each cell."""
    key = override.lstrip("+~").split("=", 1)[0]
    return key == "runs_dir" or key == "hydra" or key.startswith(("hydra.", "hydra/"))


def cell_overrides(grid: Grid) -> list[list[str]]:
    """Each cell's overrides, in the order Hydra's basic sweeper would run them (arm, then seed, then the
    swept values): `+arm=<arm> seed=<seed>` and the grid's run overrides, a swept one at its cell's value
    (the launch-wide ones, runs_dir and hydra.*, are the multirun's: `launch_wide_overrides`)."""
    fixed, swept = sweep_forms(grid.overrides)
    fixed = [o for o in fixed if not _launch_wide(o)]
    return [[*arm_words(grid, arm), f"seed={seed}", *fixed, *values]
            for arm in grid.arms for seed in grid.seeds for values in itertools.product(*swept)]


def launch_wide_overrides(grid: Grid) -> list[str]:
    """Hydra's settings for the multirun's command line (runs_dir goes there from `grid.runs_dir`, once)."""
    return [o for o in sweep_forms(grid.overrides)[0]
            if _launch_wide(o) and not o.lstrip("+~").startswith("runs_dir=")]


def open_parent(client: MlflowClient, grid: Grid, experiment_name: str) -> str:
    """The grid's parent run, found again in whichever experiment holds it (a store from before the
    experiment's rename keeps its grid, and its cells join it there), else opened in `experiment_name`."""
    earlier = find_parent(client, grid.experiment, kinds=(ABLATION,))
    experiment_id = (earlier.info.experiment_id if earlier is not None
                     else get_or_create_experiment(client, experiment_name, grid.runs_dir))
    params = {"arms": ",".join(grid.arms), "seeds": ",".join(grid.seeds), "overrides": " ".join(grid.overrides)}
    parent, found = find_or_open_parent(
        client, experiment_id, parent_filter(ABLATION, grid.experiment), f"ablate:{grid.experiment}",
        parent_tags(ABLATION, grid.experiment), params,
    )
    if found:  # cells whose process was killed outright are still RUNNING: end them KILLED; they run again
        end_dead_runs(client, [experiment_id], children_filter(parent), "the ablation rerun")
    return parent


def unfinished_cells(client: MlflowClient, parent: str, since_ms: int) -> list[str]:
    """Cells started since `since_ms` (epoch ms) under the parent that did not finish: 'arm seed N ...: reason'."""
    experiment_id = client.get_run(parent).info.experiment_id
    children = client.search_runs([experiment_id], filter_string=children_filter(parent))
    return [
        f"{r.data.tags.get(tags.ABLATION_ARM, '?')} seed {r.data.tags.get(tags.SEED, '?')} {r.info.status}: "
        f"{r.data.tags.get(tags.END_REASON, 'no reason recorded')[:160]}"
        for r in children
        if r.info.start_time >= since_ms and r.info.status in ("FAILED", "KILLED")
    ]


JOB_LAUNCHERS = ("submitit_local", "slurm")  # each cell a job with its own log files
CELL_STOP_GRACE_S = 30.0  # for stopped cells to end their MLflow runs before what is left is killed


def finished_hashes(client: MlflowClient, parent: str) -> set[str]:
    """The config hashes of the cells that already FINISHED under the parent (a rerun skips them)."""
    experiment_id = client.get_run(parent).info.experiment_id
    done = client.search_runs([experiment_id], filter_string=f"{children_filter(parent)} and attributes.status = 'FINISHED'",
                              max_results=10_000)
    return {r.data.tags.get(tags.CONFIG_HASH) for r in done}


def main(argv: list[str] | None = None) -> int:
    quiet_libraries()
    return run_together([sys.argv[1:] if argv is None else argv])


def _checked(argvs: list[list[str] | Grid]) -> tuple[list[Grid], Grid, str]:
    """(each command's grid, read and validated; the grid they make together; the MLflow experiment name).
    A Grid given as data (an evidence protocol's cells, sweeps/evidence/plan.py) is taken as it is."""
    grids = [argv if isinstance(argv, Grid) else parse_args(argv) for argv in argvs]
    names = set()
    for grid in grids:
        if not grid.arm_overrides:
            read_grid(grid)
        names.add(validate_cells(grid))
    first = grids[0]
    shared = {"experiment": lambda g: g.experiment, "runs_dir": lambda g: g.runs_dir,
              "launcher": lambda g: g.launcher, "workers": lambda g: g.workers, "report": lambda g: g.report,
              "cells_per_device": lambda g: g.cells_per_device, "devices_per_cell": lambda g: g.devices_per_cell,
              "hydra overrides": launch_wide_overrides,
              "trainer.num_threads": lambda g: g.first_config.trainer.num_threads,
              "trainer.accelerator": lambda g: g.first_config.trainer.accelerator}
    differ = [k for k, of in shared.items() if any(of(g) != of(first) for g in grids)]
    if differ or len(names) > 1:
        raise ConfigError(f"grids run together share their {', '.join(shared)}; these differ: "
                          f"{', '.join(differ) or 'the MLflow experiment'}.")
    seen: dict[tuple[str, str], int] = {}
    for i, grid in enumerate(grids):
        for cell in grid.cell_arms:
            for seed in grid.seeds:
                if seen.setdefault((cell, seed), i) != i:
                    raise ConfigError(f"the cell `{cell}` seed {seed} is in two of the grids run together.")
    together = Grid(experiment=first.experiment, arms=list(dict.fromkeys(a for g in grids for a in g.arms)),
                    seeds=list(dict.fromkeys(s for g in grids for s in g.seeds)), launcher=first.launcher,
                    workers=first.workers, report=first.report, runs_dir=first.runs_dir,
                    overrides=list(dict.fromkeys(o for g in grids for o in g.overrides)),
                    cell_hashes=set().union(*(g.cell_hashes for g in grids)),
                    skip_finished=all(g.skip_finished for g in grids), first_config=first.first_config,
                    cells_per_device=first.cells_per_device, devices_per_cell=first.devices_per_cell)
    return grids, together, names.pop()


def run_together(argvs: list[list[str] | Grid]) -> int:
    """Run the grids of these ablate commands or Grids (one preset; each its own arms, seeds and overrides) under the
    preset's parent run as ONE launch: every cell in one multirun (the cell-list sweeper), finished ones
    skipped; one report at the end. Exit codes as `main`'s: 0, 1 (a cell did not finish), 2 (refused),
    128 + signal (stopped)."""
    if not argvs:
        return 0
    try:
        grids, grid, experiment_name = _checked(argvs)
        first = grid.first_config
        threads, gpu_cells = first.trainer.num_threads, first.trainer.accelerator in ("gpu", "cuda")
        placement.check_placement(grid, gpu_cells)
        check_store(resolve_tracking_uri(None, grid.runs_dir))
    except ConfigError as err:
        print(f"error: {mask_password(str(err))}", file=sys.stderr)
        return 2
    except COMPOSITION_ERRORS as err:  # Hydra/OmegaConf composition errors, one line; anything else is a bug
        print(f"error: {mask_password(str(err).splitlines()[0])}", file=sys.stderr)
        return 2
    client = open_client(tracking_uri(None, grid.runs_dir))
    parent = open_parent(client, grid, experiment_name)
    cells = sum(g.cells() for g in grids)
    print(f"ablation '{grid.experiment}': {_shape(grids)} = {cells} cells; parent run {parent}")
    done = finished_hashes(client, parent) if grid.skip_finished else set()
    # A grid whose every cell finished is not launched at all; the others' finished cells skip themselves.
    cell_list = [cell for g in grids if not g.cell_hashes <= done for cell in cell_overrides(g)]
    status, failed = "FAILED", []
    started_ms = int(time.time() * 1000)
    to_run = cells - len(grid.cell_hashes & done)
    if to_run < cells:
        print(f"{cells - to_run} of {cells} cells already finished under this parent; {to_run} to run")
    code = 0
    cells_file = None
    try:
        if to_run == 0:  # a resumed protocol's finished launch: no multirun (~20 s of start-up) to skip them
            print(f"all {cells} cells already finished under this parent: nothing to launch")
        else:
            cells_file = write_cells(cell_list)  # removed when the launch ends
            command = [sys.executable, "-m", "lit_modules.train", "-m", f"experiment={grid.experiment}",
                       f"parent_run_id={parent}", f"runs_dir={grid.runs_dir}", *launch_wide_overrides(grids[0]),
                       "hydra/sweeper=cell_list", f"hydra.sweeper.cells_file='{cells_file}'",
                       *launch_overrides(grid, threads, gpu_cells, cells=len(cell_list))]
            # Its own process group: stopping the driver (Ctrl-C, SIGTERM) stops every cell and worker process.
            with CellWatcher(client, parent, to_run):  # one line per cell as it ends
                # Cells in this terminal leave their line to the watcher; cells of a job launcher (submitit,
                # SLURM) print it into their own log, which is the only record a cell's job has.
                quiet_cells = {} if grid.launcher in JOB_LAUNCHERS else {DRIVER_PRINTS_ENV: "1"}
                code = run_as_group(command, env={**os.environ, **quiet_cells}, grace_s=CELL_STOP_GRACE_S)
        # Hydra's multirun goes on past a failed cell and exits 0: the cells' own statuses say what happened.
        failed = unfinished_cells(client, parent, started_ms)
        status = "FINISHED" if code == 0 and not failed else "FAILED"
    except Stopped as stopped:
        status = "KILLED"
        print(f"stopped by {stopped}: the grid's cells were stopped with it; the same command resumes the grid "
              "(finished cells are skipped)", file=sys.stderr)
        return 128 + stopped.signum
    finally:
        if cells_file is not None:
            os.unlink(cells_file)
        client.set_terminated(parent, status=status)
    if grid.report:
        try:
            from analysis.report import write_report

            print(f"report: {write_report(parent_run_id=parent, runs_dir=grid.runs_dir)}")
        except Exception as err:  # noqa: BLE001 - a report problem must not turn a finished grid into a crash
            print(f"report not written: {mask_password(str(err))}", file=sys.stderr)
    print(f"browse: make mlflow-ui  (parent run {parent})")
    if failed:
        print(f"error: {len(failed)} of {cells} cells did not finish (the report lists them): "
              + "; ".join(failed), file=sys.stderr)
    elif status == "FAILED":
        print(f"error: the grid's multirun exited with code {code}", file=sys.stderr)
    return 0 if status == "FINISHED" else 1


def _shape(grids: list[Grid]) -> str:
    """'4 arms x 6 seeds' (x N swept values) per grid, joined with +."""
    parts = []
    for g in grids:
        per_arm_seed = g.cells() // (len(g.arms) * len(g.seeds))
        values = f" x {per_arm_seed} swept values" if per_arm_seed > 1 else ""
        parts.append(f"{len(g.arms)} arm{'s' * (len(g.arms) != 1)} x {len(g.seeds)} seed{'s' * (len(g.seeds) != 1)}{values}")
    return " + ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
