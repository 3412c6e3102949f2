"""Ablation grids: a preset's arms x paired seeds, run by Hydra multirun under one MLflow parent run.

    python -m sweeps.ablate experiment=<preset> [arms=a,b] [seeds=2,3] [workers=N] [launcher=slurm]
                            [report=false] [run overrides]

Cells run in parallel on this machine by default: `workers` processes (default: one per core, at most one
per cell) with cores / workers threads each (`trainer.num_threads`, unless the preset or the command line
sets it). A cell's losses depend on its thread count, never on how many cells run beside it, so the same
cells with the same `trainer.num_threads` give the same results sequentially (`workers=1`) and in parallel.

Cells whose config hash already FINISHED under the parent are skipped, so an interrupted grid is
finished by running the same command again. `arms=` keeps only some of the preset's arms (their short
names) and `seeds=` replaces its seed list, e.g. to add seeds to a finished grid: the new cells join the
same parent and the report counts every finished seed. The grid ends with a report (analysis.report).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field

from mlflow.tracking import MlflowClient
from omegaconf import OmegaConf

from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.tracking.run_lifecycle import open_run, reopen_run
from lit_modules.tracking.store import get_or_create_experiment, resolve_tracking_uri, tracking_uri
from lit_modules.tracking.store_check import check_store
from sweeps.compose import CONF_DIR, compose_run_config

ROLE_TAG = "ablation.role"


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


def parse_args(argv: list[str]) -> Grid:
    grid = Grid(experiment="", arms=[], seeds=[])
    for arg in argv:
        key, _, value = arg.partition("=")
        if key == "experiment":
            grid.experiment = value
        elif key == "launcher":
            grid.launcher = value or None
        elif key == "workers":
            if not value.isdigit() or int(value) < 1:
                raise ConfigError(f"workers={value} must be a positive integer.")
            grid.workers = int(value)
        elif key == "report":
            if value.lower() not in ("true", "false"):
                raise ConfigError(f"report={value} must be true or false.")
            grid.report = value.lower() == "true"
        elif key in ("arms", "seeds", "seed"):
            key = "seeds" if key == "seed" else key  # seed=0 or seed=0,1: the same as seeds=
            items = [v.strip() for v in value.split(",") if v.strip()]
            if not items:
                raise ConfigError(f"{key}= lists nothing; give comma-separated {key}.")
            if key == "seeds" and not all(_is_int(v) for v in items):
                raise ConfigError(f"seeds={value} must be comma-separated integers.")
            setattr(grid, f"only_{key}", items)
        elif key in ("+arm", "arm"):
            raise ConfigError(f"{key}= would fight the preset's grid; use arms=<short names> instead.")
        else:
            if key == "runs_dir":
                grid.runs_dir = value
            grid.overrides.append(arg)
    if not grid.experiment:
        raise ConfigError("Name the preset to ablate: experiment=<name> (see conf/experiment/).")
    return grid


def read_grid(grid: Grid) -> None:
    """Arms and seeds come from the preset's hydra.sweeper.params, the same lines multirun expands."""
    path = CONF_DIR / "experiment" / f"{grid.experiment}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml")))
        raise ConfigError(f"There is no preset '{grid.experiment}' in conf/experiment/ (known: {known}).")
    params = OmegaConf.select(OmegaConf.load(path), "hydra.sweeper.params") or {}
    arms = str(params.get("+arm", "")).split(",") if params.get("+arm") else []
    seeds = [s.strip() for s in str(params.get("seed", "0")).split(",")]
    if not arms:
        raise ConfigError(f"The preset '{grid.experiment}' declares no arms (hydra.sweeper.params['+arm']).")
    grid.arms, grid.seeds = [a.strip() for a in arms], seeds
    launchers = sorted(p.stem for p in (CONF_DIR / "hydra" / "launcher").glob("*.yaml"))
    if grid.launcher and grid.launcher not in launchers:
        raise ConfigError(f"launcher={grid.launcher} is not in conf/hydra/launcher/ (known: {', '.join(launchers)}).")
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


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def validate_cells(grid: Grid) -> str:
    """Every arm must compose and validate before anything runs; returns the MLflow experiment name."""
    name = ""
    for arm in grid.arms:
        cfg = validate(compose_run_config([f"experiment={grid.experiment}", f"+arm={arm}", *grid.overrides]))
        name = cfg.logger.experiment
        if not cfg.ablation.arm:
            raise ConfigError(f"The arm file conf/arm/{arm}.yaml does not set ablation.arm.")
    return name


def _threads_per_cell(grid: Grid) -> int | None:
    """The preset's (or the command line's) trainer.num_threads; None when it leaves torch's default."""
    return compose_run_config([f"experiment={grid.experiment}", f"+arm={grid.arms[0]}", *grid.overrides]).trainer.num_threads


def launch_overrides(grid: Grid, threads: int | None) -> list[str]:
    """Hydra launcher overrides: an explicit launcher as given; else local worker processes x threads."""
    cores = os.cpu_count() or 1
    cells = len(grid.arms) * len(grid.seeds)
    if grid.launcher == "submitit_local":  # every cell at once on this machine, sharing its cores
        return [f"hydra/launcher={grid.launcher}", *([] if threads else [f"trainer.num_threads={max(1, cores // cells)}"])]
    if grid.launcher and grid.launcher != "local_parallel":
        return [f"hydra/launcher={grid.launcher}"]  # e.g. slurm: the cluster decides
    workers = min(grid.workers or max(1, cores // (threads or 1)), cells)
    if workers <= 1:
        return []  # Hydra's basic launcher: cells one after another in one process
    extra = [] if threads else [f"trainer.num_threads={max(1, cores // workers)}"]
    return ["hydra/launcher=local_parallel", f"hydra.launcher.n_jobs={workers}", *extra]


def open_parent(client: MlflowClient, grid: Grid, experiment_name: str) -> str:
    experiment_id = get_or_create_experiment(client, experiment_name, grid.runs_dir)
    found = client.search_runs(
        [experiment_id],
        filter_string=f"tags.`ablation.name` = '{grid.experiment}' and tags.`{ROLE_TAG}` = 'parent'",
    )
    if found:
        reopen_run(client, found[0].info.run_id)
        return found[0].info.run_id
    tags = {"ablation.name": grid.experiment, ROLE_TAG: "parent"}
    params = {"arms": ",".join(grid.arms), "seeds": ",".join(grid.seeds), "overrides": " ".join(grid.overrides)}
    return open_run(client, experiment_id, f"ablate:{grid.experiment}", tags, params)


def main(argv: list[str] | None = None) -> int:
    try:
        grid = parse_args(sys.argv[1:] if argv is None else argv)
        read_grid(grid)
        experiment_name = validate_cells(grid)
        threads = _threads_per_cell(grid)
        check_store(resolve_tracking_uri(None, grid.runs_dir))
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - Hydra composition errors, one line
        print(f"error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    client = MlflowClient(tracking_uri(None, grid.runs_dir))
    parent = open_parent(client, grid, experiment_name)
    cells = len(grid.arms) * len(grid.seeds)
    print(f"ablation '{grid.experiment}': {len(grid.arms)} arms x {len(grid.seeds)} seeds = {cells} cells; parent run {parent}")
    command = [sys.executable, "-m", "lit_modules.train", "-m", f"experiment={grid.experiment}",
               f"parent_run_id={parent}", *grid.overrides]
    if grid.only_arms:
        command.append(f"+arm={','.join(grid.arms)}")  # the command line wins over the preset's sweep params
    if grid.only_seeds:
        command.append(f"seed={','.join(grid.seeds)}")
    command += launch_overrides(grid, threads)
    status = "FAILED"
    try:
        code = subprocess.run(command, env={**os.environ}).returncode
        status = "FINISHED" if code == 0 else "FAILED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    finally:
        client.set_terminated(parent, status=status)
    if status == "FINISHED" and grid.report:
        try:
            from analysis.report import write_report

            print(f"report: {write_report(parent_run_id=parent, runs_dir=grid.runs_dir)}")
        except Exception as err:  # noqa: BLE001 - a report problem must not turn a finished grid into a crash
            print(f"report not written: {err}", file=sys.stderr)
    print(f"browse: make mlflow-ui  (parent run {parent})")
    return 0 if status == "FINISHED" else 1


if __name__ == "__main__":
    sys.exit(main())
