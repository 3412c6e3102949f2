"""One training run: validate -> build -> fit -> record, in the MLflow run it opens (or resumes).

    result = run(cfg)   # cfg from lit_modules.config.composition.compose_run_config(overrides)

The command line is lit_modules/train.py's; this module holds what a run does once its config composed,
and loads Lightning, torch and MLflow (train.py imports it only then, so a bad command line is refused
before they load).
"""

from __future__ import annotations

import functools
import json
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import lightning as L
import torch
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from lit_modules.build import build_callbacks, build_data, build_model, build_module, build_trainer
from lit_modules.callbacks.live_progress import LiveProgress
from lit_modules.callbacks.run_record import RunRecord
from lit_modules.config.budget import Budget
from lit_modules.config.identity import identity_of
from lit_modules.config.validate import validated
from lit_modules.distributed.ranks import launched_ranks
from lit_modules.evaluation.after_training import evaluate_after_training
from lit_modules.plan.dry_run import print_dry_run
from lit_modules.resume import init_weights_from, resolve_resume
from lit_modules.runs import tags as run_tags
from lit_modules.runs.finished import CONFIG_SIDECAR
from lit_modules.tracking import repro
from lit_modules.tracking.job_tags import scheduler_tags
from lit_modules.tracking.lightning_logger import MlflowRunLogger
from lit_modules.tracking.run_lifecycle import run_lifecycle, set_tags, stop_signals_deferred
from lit_modules.tracking.run_start import finished_twin, log_start_artifacts, open_new_run
from lit_modules.runs.store import store_exists
from lit_modules.tracking.store import open_client, resolve_tracking_uri, tracking_uri
from lit_modules.runs.store_check import check_store
from lit_modules.runs.uri_masking import mask_tree
from lit_modules.steady_heap import steady_heap


@dataclass
class RunResult:
    run_id: str | None
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    budget: Budget | None = None
    config_hash: str | None = None


def run(
    cfg: DictConfig,
    extra_callbacks: Iterable[L.Callback] = (),
    cli_overrides: list[str] | None = None,
    on_opened: Callable[[str], None] | None = None,
    progress: bool = False,
) -> RunResult:
    """One training run. Raises ConfigError/DataError before any run is opened when input is bad.

    `on_opened` receives the MLflow run id as soon as the run exists (sweep drivers tag it afterwards).
    `progress` shows one live progress line on stderr (the CLI's single runs; drivers print their own).
    The store is checked first but touched only when needed: a refusal or a dry run leaves no store behind.
    """
    uri = resolve_tracking_uri(cfg.logger.tracking_uri, cfg.runs_dir)
    store = _store_client(cfg.logger.tracking_uri, cfg.runs_dir)
    # Under torchrun every rank runs this function; only rank 0 touches the store (see distributed.ranks).
    ranks = launched_ranks(cfg.trainer.accelerator)
    resume_target = None
    if cfg.resume:
        resume_target = ranks.decide(lambda: _locate_resume(cfg, uri, store, cli_overrides))
        cfg = resume_target.config
    checked = validated(cfg)  # the techniques are built and asked here once, and trained with below
    cfg, budget = checked.config, checked.budget
    if cfg.dry_run:
        print_dry_run(cfg, budget, ranks.is_zero)  # the plan is printed first: the reader sees what does not fit
        return RunResult(None, "DRY_RUN", budget=budget)
    if resume_target is None:
        # Before data and model are built: a store that cannot be used fails in seconds, on every rank.
        ranks.decide(lambda: check_store(uri))

    resolved = OmegaConf.to_container(cfg, resolve=True)
    recorded = mask_tree(resolved)  # what params, artifacts and checkpoints keep: no password of any URL
    config_hash = repro.config_hash(identity_of(resolved))
    if resume_target is None and cfg.ablation.skip_finished and cfg.parent_run_id:
        done = ranks.decide(lambda: finished_twin(store(), cfg.parent_run_id, config_hash))
        if done is not None:
            if ranks.is_zero:
                print(f"skipping: run {done.info.run_id} under this parent already finished this config ({config_hash})")
            metrics = {k: float(v) for k, v in done.data.metrics.items()}
            return RunResult(done.info.run_id, "SKIPPED", metrics, budget, config_hash)

    # Read (and checksum-verified) before any data is prepared: a damaged checkpoint is refused first.
    init_weights = (ranks.decide(lambda: init_weights_from(str(cfg.init_from), _lookup(uri, store)))
                    if cfg.init_from else None)
    steady_heap()  # no page faults per step on CPU (lit_modules/steady_heap.py); values unchanged
    if cfg.trainer.num_threads:
        torch.set_num_threads(cfg.trainer.num_threads)
    L.seed_everything(cfg.seed, verbose=False)
    techniques = checked.techniques
    data = build_data(cfg)
    model, init_stds = build_model(cfg, techniques, init_weights.load_into if init_weights is not None else None)
    # Made once the data is known to fit: a refused run leaves no store behind (the client creates it).
    client = store() if ranks.is_zero else None

    module = build_module(cfg, model, techniques, budget, data.bytes_per_token)

    git = repro.git_state()

    def open_run_id() -> str:
        if resume_target is None:
            return open_new_run(client, cfg, recorded, budget, config_hash, git, data, techniques, init_stds)
        return resume_target.run_id  # reopened by the lifecycle below

    run_id = ranks.decide(open_run_id)
    if on_opened is not None and ranks.is_zero:
        on_opened(run_id)
    checkpoint_dir = Path(cfg.runs_dir).resolve() / "checkpoints" / run_id
    lifecycle = (run_lifecycle(client, run_id, paused=lambda: _paused(cfg, budget), owner_dir=checkpoint_dir,
                               reopen=resume_target is not None) if ranks.is_zero else nullcontext())
    with lifecycle:
        if ranks.is_zero:
            checkpoint_dir.mkdir(parents=True, exist_ok=True)
            (checkpoint_dir / CONFIG_SIDECAR).write_text(
                json.dumps({"config": recorded, "mlflow_run_id": run_id, "config_hash": config_hash}, indent=2)
            )
            set_tags(client, run_id, {run_tags.CHECKPOINT_DIR: str(checkpoint_dir), **scheduler_tags()})
            if resume_target is None:
                with stop_signals_deferred():
                    log_start_artifacts(client, run_id, cfg, git, init_stds)
        record = RunRecord(recorded, run_id, config_hash)
        callbacks = build_callbacks(cfg, budget, techniques, checkpoint_dir, record)
        if progress and ranks.is_zero:
            callbacks.append(LiveProgress(budget.steps, budget.tokens_per_step))
        logger = MlflowRunLogger(uri, run_id)
        trainer = build_trainer(cfg, budget, [*callbacks, *extra_callbacks], logger, checkpoint_dir)
        ckpt = str(resume_target.checkpoint) if resume_target else None
        trainer.fit(module, datamodule=data.datamodule, ckpt_path=ckpt, weights_only=True if ckpt else None)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        if not _paused(cfg, budget) and ranks.is_zero:
            metrics.update(evaluate_after_training(cfg, module, techniques, data, client, run_id, budget.steps))
    status = "KILLED" if _paused(cfg, budget) else "FINISHED"
    return RunResult(run_id, status, metrics, budget, config_hash)


def _locate_resume(cfg: DictConfig, uri: str, store: Callable[[], MlflowClient], cli_overrides: list[str] | None):
    check_store(uri)  # before the client exists: making one creates a local store
    return resolve_resume(cfg, _lookup(uri, store), cli_overrides)


def _lookup(uri: str, store: Callable[[], MlflowClient]) -> MlflowClient | None:
    """The client to look a run id up in; None when the local store is not made yet (a lookup must not make it)."""
    return store() if store_exists(uri) else None


def _store_client(configured: str | None, runs_dir: str) -> Callable[[], MlflowClient]:
    """The MLflow client, made on first use: making it creates a local store (and its folder)."""
    return functools.cache(lambda: open_client(tracking_uri(configured, runs_dir)))


def _paused(cfg: DictConfig, budget: Budget) -> bool:
    stop = cfg.trainer.stop_after_steps
    return stop is not None and stop < budget.steps
