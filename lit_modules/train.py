"""Entry point: compose -> validate -> build -> fit -> record (the last four: lit_modules/training_run.py).

    python -m lit_modules.train [hydra overrides]          # one run
    python -m lit_modules.train -m optim.lr=1e-3,3e-3      # Hydra multirun
    python -m lit_modules.train dry_run=true               # sizes, FLOPs, budget, ETA; no run opened
    python -m lit_modules.train resume=<run id | ckpt>     # continue the same MLflow run exactly

A single run is composed with Hydra's Compose API and never enters Hydra's run mode (whose output folder
would exist before any check); `-m` goes through @hydra.main once every job composes. Lightning, torch's
training stack and MLflow load only after the command line composed: a bad key or value is one sentence
in about a second.
"""

from __future__ import annotations

from lit_modules.quiet import DRIVER_PRINTS_ENV, quiet_libraries  # first: before tqdm is imported

import os
import sys
from typing import TYPE_CHECKING, NoReturn

import hydra
from omegaconf import DictConfig

from lit_modules.config import files
from lit_modules.config.composition import compose_multirun, compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.help import HELP_FLAGS, help_text
from lit_modules.config.schema import register_schema
from lit_modules.data import DataError
from lit_modules.config.errors import EvalError
from lit_modules.stack_dumps import enable_stack_dumps
from lit_modules.tracking.stop_deadline import enable_stop_deadline
from lit_modules.runs.uri_masking import mask_password

if TYPE_CHECKING:
    from lit_modules.training_run import RunResult


def run(cfg: DictConfig, **kwargs) -> RunResult:
    """One training run (lit_modules.training_run.run: `extra_callbacks`, `cli_overrides`, `on_opened`,
    `progress`); raises ConfigError/DataError before any run is opened when the input is bad."""
    from lit_modules.training_run import run as run_training  # the heavy stack loads here, not at import

    return run_training(cfg, **kwargs)


def _cli_overrides() -> list[str]:
    try:
        from hydra.core.hydra_config import HydraConfig

        return list(HydraConfig.get().overrides.task)
    except Exception:  # noqa: BLE001 - not under Hydra (e.g. called from Python)
        return []


def _in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001
        return False


@hydra.main(config_path=str(files.CONF_DIR), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> float | None:
    quiet_libraries()  # also in a launcher's worker process (local_parallel), which never ran main()
    register_schema()  # and its resolvers, which the job's config may use (a grid's `ablation.arm`)
    return _run_and_report(cfg, _cli_overrides(), multirun=_in_multirun())


def _run_and_report(cfg: DictConfig, overrides: list[str], multirun: bool) -> float | None:
    try:
        result = run(cfg, cli_overrides=overrides, progress=not multirun)
    except (ConfigError, DataError, EvalError) as err:
        _refuse(err)
    except Exception as err:  # noqa: BLE001
        if not multirun:
            raise
        # One failed cell (e.g. a diverging arm) must not abort the grid; MLflow already says FAILED.
        print(f"cell failed: {type(err).__name__}: {mask_password(str(err))}", file=sys.stderr)
        return None
    from lit_modules.distributed.ranks import launched_ranks

    if result.status == "DRY_RUN" or not launched_ranks().is_zero:
        return None
    val = result.metrics.get("val/loss")
    if os.environ.get(DRIVER_PRINTS_ENV):
        return val
    print(f"run {result.run_id} {result.status.lower()}: val/loss={val:.4f}" if val is not None else f"run {result.run_id}")
    return val


def _refuse(err: Exception) -> NoReturn:
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)


MULTIRUN_FLAGS = ("-m", "--multirun")


def _validate_jobs(jobs: list[DictConfig]) -> None:
    """Every job of a grid is checked before the first one trains: a bad value in a later job would otherwise
    stop the grid midway, with the earlier jobs trained and recorded."""
    from omegaconf import open_dict

    from lit_modules.config.validate import validate

    for job in jobs:
        cfg = job.copy()
        with open_dict(cfg):
            cfg.pop("hydra", None)
        validate(cfg)


def _checked_before_the_stack(cfg: DictConfig) -> bool:
    """A single run is validated before the training stack (Lightning, MLflow) loads, so a refusal's
    sentence comes in about 2 s, not 6; a dry run prints its plan from here (True: done).
    The same checks and sentences as training_run.run's, which validates again (~0.1 s). A resumed run's
    config is the one it resumes, known only from the store: it is checked there, once `resume=` is known to
    name a checkpoint or a run (here, for a single process: under torchrun rank 0 alone looks it up)."""
    from lit_modules.distributed.ranks import launched_ranks

    if cfg.resume:
        if not launched_ranks(cfg.trainer.accelerator).external:
            from lit_modules.resume import check_resume_reference

            try:
                check_resume_reference(cfg)
            except ConfigError as err:
                _refuse(err)
        return False
    from lit_modules.config.validate import validated

    try:
        checked = validated(cfg)
        if checked.config.dry_run:
            from lit_modules.plan.dry_run import print_dry_run  # torch: only once the plan is printed

            print_dry_run(checked.config, checked.budget, launched_ranks(cfg.trainer.accelerator).is_zero)
    except (ConfigError, DataError, EvalError) as err:
        _refuse(err)
    return bool(checked.config.dry_run)


def main() -> None:
    """A single run is composed here and never enters Hydra's run mode, which makes its output folder
    before any check could refuse the input; a `-m` grid goes to Hydra once every job composes.
    `--help` is answered from the files (lit_modules/config/help.py); Hydra's own flags (--hydra-help,
    --cfg job, --info, -cn ...) hand the whole command line to Hydra.
    """
    argv = sys.argv[1:]
    if any(arg in HELP_FLAGS for arg in argv):  # from the files alone: Hydra's own --help composes every group
        print(help_text())
        return
    if "--hydra-help" in argv:
        sys.argv[sys.argv.index("--hydra-help")] = "--help"
    register_schema()
    quiet_libraries()
    enable_stack_dumps()
    argv = sys.argv[1:]
    overrides = [arg for arg in argv if arg not in MULTIRUN_FLAGS]
    if any(arg.startswith("-") for arg in overrides):
        _hydra_main()
        return
    multirun = len(overrides) < len(argv)
    try:
        enable_stop_deadline()
        if multirun:
            jobs = compose_multirun(overrides)
            _validate_jobs(jobs)
        else:
            cfg = compose_run_config(overrides)
    except ConfigError as err:
        _refuse(err)
    if not multirun:
        if not _checked_before_the_stack(cfg):
            _run_and_report(cfg, overrides, multirun=False)
        return
    from lit_modules.tracking.multirun_parent import multirun_parent  # MLflow: only once every job composed

    try:
        with multirun_parent(jobs, overrides) as parent:
            if parent is not None:
                print(f"multirun: {len(jobs)} jobs under parent run {parent}")
                sys.argv.append(f"parent_run_id={parent}")  # every job nests under it
            _hydra_main()
    except ConfigError as err:  # the store cannot be used: refused before any job
        _refuse(err)


if __name__ == "__main__":
    main()
