"""A sweep's study and trials, after `sweeps.optuna_sweep` has read the command line and started the
driver's other workers: the driver's set-up (validation, study, parent run), every worker's trial loop, and
the closing summary.

Kept apart from the entry point because importing it costs ~8 s of CPU (Lightning, MLflow, Optuna): the entry
point starts the other workers first, so their imports run beside the driver's instead of after them.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import optuna
from mlflow.tracking import MlflowClient
from omegaconf import open_dict

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.data import DataError
from lit_modules.runs import tags
from lit_modules.runs.search import SWEEP, parent_filter, parent_tags
from lit_modules.runs.store_check import check_database_driver, check_store
from lit_modules.runs.uri_masking import mask_password
from lit_modules.tracking.run_lifecycle import find_or_open_parent, flatten, set_tags
from lit_modules.tracking.store import get_or_create_experiment, open_client, resolve_tracking_uri, store_lock, tracking_uri
from lit_modules.train import run
from sweeps.progress_lines import TrialLines, best_trial_line
from sweeps.pruning import OptunaPruning, TrialPruned
from sweeps.samplers import build_pruner, build_sampler
from sweeps.space import ParamSpec, as_overrides, sample
from sweeps.summary import write_summary
from sweeps.sweep_config import SweepConfig
from sweeps.sweep_workers import await_parent, stop_workers

if TYPE_CHECKING:
    from sweeps.optuna_args import Invocation

FINISHED_STATES = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
PARENT_ATTR = "mlflow_parent_run_id"  # in the study: what a worker on another machine joins


STORAGE = "The sweep storage"
STORAGE_HINT = "set sweep.storage to a database this machine can use, or leave it unset for <runs_dir>/optuna.db"


def check_storage(url: str) -> None:
    """sweep.storage names a database SQLAlchemy can open from here (its driver installed, its server
    listening, its SQLite folder writable); StoreError (one sentence) otherwise, before anything is made."""
    check_database_driver(url, STORAGE, STORAGE_HINT)
    check_store(url, what=STORAGE, hint=STORAGE_HINT)


def storage_url(cfg: SweepConfig) -> str:
    if cfg.storage:
        return cfg.storage
    os.makedirs(cfg.runs_dir, exist_ok=True)
    return f"sqlite:///{os.path.abspath(os.path.join(cfg.runs_dir, 'optuna.db'))}"


class StaleTrialHandler:
    """A trial whose worker died: its MLflow child ends KILLED, and Optuna retries its parameters."""

    def __init__(self, cfg: SweepConfig):
        self.runs_dir = cfg.runs_dir
        self.retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=cfg.max_retry)

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        run_id = trial.user_attrs.get("mlflow_run_id")
        if run_id:
            client = open_client(tracking_uri(None, self.runs_dir))
            set_tags(client, run_id, {"end_reason": "worker died (no heartbeat)", "sweep.trial_state": "FAIL"})
            client.set_terminated(run_id, status="KILLED")
        self.retry(study, trial)


def open_study(cfg: SweepConfig, specs: list[ParamSpec], worker_index: int = 0) -> optuna.Study:
    with store_lock(storage_url(cfg)):  # two sweeps started together on a fresh storage: one creates it
        storage = optuna.storages.RDBStorage(
            storage_url(cfg),
            heartbeat_interval=cfg.heartbeat_interval,
            grace_period=cfg.grace_period,
            heartbeat_stale_trial_callback=StaleTrialHandler(cfg),
        )
    # A reseeded sampler per worker and per invocation: otherwise parallel workers, or a resumed sweep,
    # replay the same random draws and repeat trials.
    existing = _existing_trials(storage, cfg.study_name)
    sampler_cfg = dataclasses.replace(cfg.sampler, seed=cfg.sampler.seed + 1000 * worker_index + existing)
    return optuna.create_study(
        study_name=cfg.study_name,
        storage=storage,
        sampler=build_sampler(sampler_cfg, specs),
        pruner=build_pruner(cfg.pruner),
        direction=cfg.direction,
        load_if_exists=True,
    )


def _existing_trials(storage: optuna.storages.BaseStorage, study_name: str) -> int:
    try:
        study_id = storage.get_study_id_from_name(study_name)
    except KeyError:
        return 0
    return len(storage.get_all_trials(study_id, deepcopy=False))


def _grid_size(specs: list[ParamSpec]) -> int:
    size = 1
    for spec in specs:
        size *= len(spec.choices or ())
    return size


def _grid_exhausted(cfg: SweepConfig, specs: list[ParamSpec], study: optuna.Study) -> bool:
    if cfg.sampler.name != "grid":
        return False
    tried = {tuple(sorted(t.params.items())) for t in study.get_trials(deepcopy=False)
             if t.state != optuna.trial.TrialState.WAITING}
    return len(tried) >= _grid_size(specs)


def finished(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=FINISHED_STATES))


def open_parent_run(client: MlflowClient, cfg: SweepConfig) -> str:
    """The study's parent run: found again by tag on a rerun, so a resumed sweep keeps one parent."""
    experiment_id = get_or_create_experiment(client, cfg.experiment, cfg.runs_dir)
    # Nested settings (sampler, pruner) as one param per field, like a run's config: sweep.pruner.name, ...
    params = flatten({"sweep": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "space"}})
    params.update({f"space.{k}": str(v) for k, v in cfg.space.items()})
    run_id, _ = find_or_open_parent(
        client, experiment_id, parent_filter(SWEEP, cfg.study_name), f"sweep:{cfg.study_name}",
        parent_tags(SWEEP, cfg.study_name), params,
    )
    return run_id


def make_objective(cfg: SweepConfig, specs: list[ParamSpec], run_overrides: list[str], parent_run_id: str, threads: int):
    client = open_client(tracking_uri(None, cfg.runs_dir))

    def objective(trial: optuna.Trial) -> float:
        opened: list[str] = []

        def remember(run_id: str) -> None:
            opened.append(run_id)
            trial.set_user_attr("mlflow_run_id", run_id)

        try:
            sampled = sample(trial, specs)
            run_cfg = compose_run_config([
                *cfg.overrides,
                *run_overrides,
                *as_overrides(sampled),
                f"logger.experiment={cfg.experiment}",
                f"runs_dir={cfg.runs_dir}",
                f"trainer.num_threads={threads}",
                "ablation.skip_finished=false",  # every trial gets its own child run
            ])
            with open_dict(run_cfg):
                run_cfg.parent_run_id = parent_run_id
                run_cfg.logger.run_name = f"{cfg.study_name}/trial-{trial.number}"
                run_cfg.tags.update(
                    {tags.SWEEP_STUDY: cfg.study_name, tags.SWEEP_TRIAL: str(trial.number), tags.SWEEP_ROLE: tags.TRIAL_ROLE}
                )
                # The trial's choices as drawn (group selections are not config params; None means off).
                run_cfg.tags.update({f"sweep.param.{k}": "off" if v is None else str(v) for k, v in sampled.items()})
            result = run(run_cfg, extra_callbacks=[OptunaPruning(trial, cfg.metric)], on_opened=remember)
        except TrialPruned as err:
            _end_trial(client, trial, opened, "PRUNED", str(err))
            raise optuna.TrialPruned(str(err)) from None
        except Exception as err:
            _end_trial(client, trial, opened, "FAIL", f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}")
            raise
        value = result.metrics.get(cfg.metric)
        if value is None:
            _end_trial(client, trial, opened, "FAIL", f"the run logged no '{cfg.metric}'")
            raise RuntimeError(f"The run logged no '{cfg.metric}'.")
        _end_trial(client, trial, opened, "COMPLETE", "")
        return value

    return objective


def _end_trial(client: MlflowClient, trial: optuna.Trial, opened: list[str], state: str, reason: str) -> None:
    trial.set_user_attr("state", state)
    if reason:
        trial.set_user_attr("reason", reason[:500])
    if opened:
        trial.set_user_attr("mlflow_run_id", opened[0])
        set_tags(client, opened[0], {"sweep.trial_state": state, "sweep.reason": reason[:500] or "-"})


def running(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))


def work(
    cfg: SweepConfig, specs: list[ParamSpec], run_overrides: list[str], parent_run_id: str, threads: int,
    worker_index: int = 0,
) -> None:
    """Run trials until the study has n_trials finished ones; failures are recorded, never fatal.

    A worker starts a trial only while finished + running < n_trials, so parallel workers never
    overshoot the total; while others finish the last trials it waits, failing stale ones (whose
    worker died) so they are retried.
    """
    study = open_study(cfg, specs, worker_index)
    objective = make_objective(cfg, specs, run_overrides, parent_run_id, threads)
    lines = TrialLines(cfg.n_trials, cfg.metric, cfg.workers)
    failures = 0
    while finished(study) < cfg.n_trials:
        if _grid_exhausted(cfg, specs, study):
            print(f"the grid has {_grid_size(specs)} points and all were tried; stopping before {cfg.n_trials} finished")
            return
        if finished(study) + running(study) >= cfg.n_trials:
            optuna.storages.fail_stale_trials(study)
            time.sleep(1.0)
            continue
        before = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)))
        study.optimize(objective, n_trials=1, catch=(Exception,), gc_after_trial=True, callbacks=[lines])
        after = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)))
        failures += after - before
        if failures >= max(3, cfg.n_trials):
            raise RuntimeError(f"{failures} trials failed in this worker; see the 'reason' of each trial.")


def joined_parent(cfg: SweepConfig) -> str:
    """The parent run of a study that a driver started (a worker on another machine joins it)."""
    if cfg.storage is None and not (Path(cfg.runs_dir) / "optuna.db").is_file():
        raise ConfigError(f"There is no sweep '{cfg.study_name}' under {cfg.runs_dir}/ to join; start its driver first.")
    storage = optuna.storages.RDBStorage(storage_url(cfg))
    try:
        study_id = storage.get_study_id_from_name(cfg.study_name)
    except KeyError:
        study_id = None
    parent = storage.get_study_user_attrs(study_id).get(PARENT_ATTR) if study_id is not None else None
    if parent is None:
        raise ConfigError(
            f"There is no sweep '{cfg.study_name}' in {mask_password(storage_url(cfg))} to join yet; "
            "start its driver first (make sweep ...), then the workers."
        )
    return parent


def _joining_worker_index() -> int:
    """Distinct per worker process on any machine, so that no two workers draw the same sampler seeds."""
    return 1 + zlib.crc32(f"{socket.gethostname()}:{os.getpid()}".encode()) % 100_000




def drive(inv: Invocation, cfg: SweepConfig, specs: list[ParamSpec], others: list[subprocess.Popen]) -> int:
    """The rest of `python -m sweeps.optuna_sweep`: the driver (or a worker) once its command line is read
    and, for the driver, its other workers are started (`others`). Returns the exit status."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    joining = inv.worker and inv.parent_run_id is None and not inv.await_parent  # started by hand elsewhere
    try:
        threads = max(1, (os.cpu_count() or 1) // cfg.workers)
        if not inv.worker or joining:
            # Fail fast on a broken base experiment, before a study or a parent run exists.
            from lit_modules.config.validate import validate

            validate(compose_run_config([*cfg.overrides, *inv.run_overrides]))
            check_store(resolve_tracking_uri(None, cfg.runs_dir))  # before the study and its folder exist
            if cfg.storage:
                check_storage(cfg.storage)
        if joining:
            inv.parent_run_id = joined_parent(cfg)
            inv.worker_index = inv.worker_index or _joining_worker_index()
    except (ConfigError, DataError) as err:
        stop_workers(others)
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - e.g. Hydra rejecting an unknown override key
        stop_workers(others)
        print(f"error: {mask_password(str(err).splitlines()[0])}", file=sys.stderr)
        return 2

    if inv.await_parent:
        inv.parent_run_id = await_parent(lambda: joined_parent(cfg))
    if inv.worker:
        if joining:
            print(f"worker joined sweep '{cfg.study_name}' (parent run {inv.parent_run_id}); "
                  f"storage {mask_password(storage_url(cfg))}")
        work(cfg, specs, inv.run_overrides, inv.parent_run_id, threads, inv.worker_index)
        return 0

    try:
        client = open_client(tracking_uri(None, cfg.runs_dir))
        study = open_study(cfg, specs)  # created once here, so workers never race to create it
        parent_run_id = open_parent_run(client, cfg)
        study.set_user_attr(PARENT_ATTR, parent_run_id)  # the awaiting workers start their trials now
    except BaseException:
        stop_workers(others)
        raise
    print(f"sweep '{cfg.study_name}': {finished(study)}/{cfg.n_trials} trials finished so far; "
          f"{cfg.workers} worker(s) x {threads} thread(s); storage {mask_password(storage_url(cfg))}")
    status = "FINISHED"
    try:
        work(cfg, specs, inv.run_overrides, parent_run_id, threads)
        codes = [p.wait() for p in others]
        if any(codes):
            status = "FAILED"
    except KeyboardInterrupt:
        status = "KILLED"
        raise
    except Exception:
        status = "FAILED"
        raise
    finally:
        final = open_study(cfg, specs)
        summary_dir = write_summary(final, cfg, client, parent_run_id)
        client.set_terminated(parent_run_id, status=status)
        best = best_trial_line(final, cfg.metric)
        if best:
            print(best)
        print(f"summary: {summary_dir / 'summary.md'}")
        try:
            from analysis.sweep_report import write_sweep_report

            print(f"report: {write_sweep_report(parent_run_id, cfg.runs_dir)}")
        except Exception as err:  # noqa: BLE001 - a report problem must not change the sweep's outcome
            print(f"report not written: {err}", file=sys.stderr)
        print(f"browse: make mlflow-ui  (experiment '{cfg.experiment}', parent run {parent_run_id})")
    return 0 if status == "FINISHED" else 1

