"""Entry point: compose -> validate -> build -> fit -> log.

    python -m lit_modules.train [hydra overrides]          # one run
    python -m lit_modules.train -m optim.lr=1e-3,3e-3      # Hydra multirun
    python -m lit_modules.train dry_run=true               # sizes, FLOPs, budget, ETA; no run opened
    python -m lit_modules.train resume=<run id | ckpt>     # continue the same MLflow run exactly

A single run is composed with Hydra's Compose API and never enters Hydra's run mode (whose output folder
would exist before any check); `-m` goes through @hydra.main once every job composes.
"""

from __future__ import annotations

from lit_modules.quiet import DRIVER_PRINTS_ENV, quiet_libraries  # first: before tqdm is imported

import copy
import functools
import json
import os
import sys
import tempfile
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, NoReturn

import hydra
import lightning as L
import torch
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from lit_modules.build import build_callbacks, build_data, build_model, build_module, build_trainer
from lit_modules.callbacks.live_progress import LiveProgress
from lit_modules.callbacks.run_record import RunRecord
from lit_modules.config import files
from lit_modules.config.budget import Budget
from lit_modules.config.composition import compose_multirun, compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.schema import OPTIM_ADDED_DEFAULTS, register_schema
from lit_modules.config.validate import validated
from lit_modules.data import DataError
from lit_modules.distributed.ranks import launched_ranks
from lit_modules.evaluation.errors import EvalError
from lit_modules.model.config import ADDED_DEFAULTS as MODEL_ADDED_DEFAULTS
from lit_modules.model.init import ADDED_DEFAULTS as INIT_ADDED_DEFAULTS
from lit_modules.optim.build import optimizer_tags
from lit_modules.plan.dry_run import dry_run_report
from lit_modules.resume import init_weights_from, resolve_resume
from lit_modules.runs import tags as run_tags
from lit_modules.runs.finished import CONFIG_SIDECAR
from lit_modules.runs.search import children_filter
from lit_modules.stack_dumps import enable_stack_dumps
from lit_modules.tracking import repro
from lit_modules.tracking.job_tags import scheduler_tags
from lit_modules.tracking.multirun_parent import multirun_parent
from lit_modules.tracking.lightning_logger import MlflowRunLogger
from lit_modules.tracking.stop_deadline import enable_stop_deadline
from lit_modules.tracking.run_lifecycle import flatten, open_run, run_lifecycle, set_tags, stop_signals_deferred
from lit_modules.tracking.init_stds import INIT_STD_TABLE, init_std_params, write_init_std_table
from lit_modules.tracking.run_names import base_run_name, unique_run_name
from lit_modules.tracking.run_owner import end_dead_runs
from lit_modules.tracking.store import (get_or_create_experiment, open_client, resolve_tracking_uri, store_exists,
                                        tracking_uri)
from lit_modules.tracking.store_check import check_store
from lit_modules.tracking.system_tags import system_tags
from lit_modules.tracking.uri_masking import mask_password, mask_tree

# Run-management fields: they change how a run is driven, not what it computes.
NOT_IDENTITY = ("dry_run", "resume", "logger", "runs_dir", "parent_run_id", "tags", "diagnostics", "eval", "plan")
# global_batch_tokens only derives accumulate_grad_batches (which is identity); activation checkpointing
# recomputes the same activations: neither changes what is computed.
NOT_IDENTITY_TRAINER = ("stop_after_steps", "num_threads", "checkpoint_every_n_steps", "global_batch_tokens",
                        "activation_checkpointing")
ADDED_FIELD_DEFAULTS = {"model": MODEL_ADDED_DEFAULTS, "init": INIT_ADDED_DEFAULTS, "optim": OPTIM_ADDED_DEFAULTS}


@dataclass
class RunResult:
    run_id: str | None
    status: str
    metrics: dict[str, float] = field(default_factory=dict)
    budget: Budget | None = None
    config_hash: str | None = None


def identity_of(resolved: dict) -> dict:
    identity = {k: v for k, v in resolved.items() if k not in NOT_IDENTITY}
    identity["trainer"] = {k: v for k, v in resolved["trainer"].items() if k not in NOT_IDENTITY_TRAINER}
    # Fields added later, at their "not used" value, are left out: a run recorded before they existed keeps
    # its hash (so a finished cell is still skipped), and any other value makes a new identity.
    for group, added in ADDED_FIELD_DEFAULTS.items():
        if isinstance(identity.get(group), dict):
            identity[group] = {k: v for k, v in identity[group].items() if not (k in added and v == added[k])}
    return identity


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
        text, refusal = dry_run_report(cfg, budget)
        if ranks.is_zero:
            print(text)
        if refusal is not None:  # the plan is printed first: the reader sees what does not fit
            raise ConfigError(refusal)
        return RunResult(None, "DRY_RUN", budget=budget)
    if resume_target is None:
        # Before data and model are built: a store that cannot be used fails in seconds, on every rank.
        ranks.decide(lambda: check_store(uri))

    resolved = OmegaConf.to_container(cfg, resolve=True)
    recorded = mask_tree(resolved)  # what params, artifacts and checkpoints keep: no password of any URL
    config_hash = repro.config_hash(identity_of(resolved))
    if resume_target is None and cfg.ablation.skip_finished and cfg.parent_run_id:
        done = ranks.decide(lambda: _finished_twin(store(), cfg.parent_run_id, config_hash))
        if done is not None:
            if ranks.is_zero:
                print(f"skipping: run {done.info.run_id} under this parent already finished this config ({config_hash})")
            metrics = {k: float(v) for k, v in done.data.metrics.items()}
            return RunResult(done.info.run_id, "SKIPPED", metrics, budget, config_hash)

    # Read (and checksum-verified) before any data is prepared: a damaged checkpoint is refused first.
    init_weights = (ranks.decide(lambda: init_weights_from(str(cfg.init_from), _lookup(uri, store)))
                    if cfg.init_from else None)
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
            return _open_new_run(client, cfg, recorded, budget, config_hash, git, data, techniques, init_stds)
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
                    _log_start_artifacts(client, run_id, cfg, git, init_stds)
        record = RunRecord(recorded, run_id, config_hash)
        callbacks = build_callbacks(cfg, budget, techniques, checkpoint_dir, record)
        if progress and ranks.is_zero:
            callbacks.append(LiveProgress(budget.steps, budget.tokens_per_step))
        trainer = build_trainer(cfg, budget, [*callbacks, *extra_callbacks], MlflowRunLogger(uri, run_id), checkpoint_dir)
        ckpt = str(resume_target.checkpoint) if resume_target else None
        trainer.fit(module, datamodule=data.datamodule, ckpt_path=ckpt, weights_only=True if ckpt else None)
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if v.numel() == 1}
        if not _paused(cfg, budget) and ranks.is_zero:
            metrics.update(_evaluate(cfg, module, techniques, data, client, run_id, budget.steps))
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


def _open_new_run(client, cfg, resolved, budget, config_hash, git, data, techniques, init_stds) -> str:
    # A child lives in its parent's experiment (MLflow nests runs only within one, and a grid made before the
    # experiment was renamed keeps finding its cells); a run without a parent goes to the configured one.
    experiment_id = (client.get_run(cfg.parent_run_id).info.experiment_id if cfg.parent_run_id
                     else get_or_create_experiment(client, cfg.logger.experiment, cfg.runs_dir))
    # An earlier run of this config whose process was killed outright is still RUNNING: end it KILLED.
    end_dead_runs(client, [experiment_id], f"tags.{run_tags.CONFIG_HASH} = '{config_hash}'", "a rerun of its config")
    tags = {
        run_tags.SEED: str(cfg.seed),
        run_tags.CONFIG_HASH: config_hash,
        "git_commit": git["commit"],
        "git_dirty": str(git["dirty"]).lower(),
        "data_fingerprint": data.fingerprint,
        **{f"pkg.{k}": v for k, v in repro.package_versions().items()},
        **{f"hw.{k}": v for k, v in repro.hardware().items()},
        **({run_tags.ABLATION_NAME: cfg.ablation.name, run_tags.ABLATION_ARM: cfg.ablation.arm} if cfg.ablation.name else {}),
        **({run_tags.ABLATION_CLAIM: cfg.ablation.claim} if cfg.ablation.claim else {}),
        **dict(cfg.tags or {}),
        **OmegaConf.to_object(cfg.init).tags(cfg.model.tie_embeddings),
        **optimizer_tags(cfg.optim),
    }
    for technique in techniques:
        tags.update(technique.tags())
    tags.update(system_tags(cfg, budget, git["commit"]))
    params = flatten(resolved)
    params.update({f"budget.{k}": str(v) for k, v in budget.as_dict().items()})
    params.update(init_std_params(init_stds))
    name = unique_run_name(client, experiment_id, base_run_name(cfg, config_hash))
    return open_run(client, experiment_id, name, tags, params, cfg.parent_run_id)


def _evaluate(cfg: DictConfig, module, techniques, data, client: MlflowClient, run_id: str, step: int) -> dict:
    """lm-eval on the model as it would be deployed (techniques' inference forms, e.g. merged PC weights)."""
    eval_cfg = OmegaConf.to_object(cfg.eval)
    if not (eval_cfg.tasks or eval_cfg.probe or eval_cfg.sampled):
        return {}
    from lit_modules.evaluation import evaluate_run, log_outcome

    model = copy.deepcopy(module.model)  # inference transforms may rewrite weights in place
    for technique in techniques:
        model = technique.prepare_for_inference(model)
    with tempfile.TemporaryDirectory() as tmp:
        outcome = evaluate_run(model.eval(), data.tokenizer, data.corpus, eval_cfg, Path(tmp),
                               train_seq_len=cfg.data.seq_len, heldout_tokens=data.shards.heldout_tokens())
        with stop_signals_deferred():  # an interrupt inside a store write would leave the run RUNNING
            log_outcome(client, run_id, outcome, step=max(step - 1, 0))
    return dict(outcome.metrics)


def _finished_twin(client: MlflowClient, parent_run_id: str, config_hash: str):
    """A FINISHED run with the same config hash under the same parent (an ablation cell already done)."""
    parent = client.get_run(parent_run_id)
    twins = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"{children_filter(parent_run_id)} and tags.{run_tags.CONFIG_HASH} = '{config_hash}' "
        "and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return twins[0] if twins else None


def _paused(cfg: DictConfig, budget: Budget) -> bool:
    stop = cfg.trainer.stop_after_steps
    return stop is not None and stop < budget.steps


def _log_start_artifacts(client: MlflowClient, run_id: str, cfg: DictConfig, git: dict, init_stds: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "config.yaml").write_text(mask_password(OmegaConf.to_yaml(cfg, resolve=True)))
        repro.write_record(
            tmp_path / "reproducibility.json",
            {"git": {k: v for k, v in git.items() if k != "diff"}, "packages": repro.package_versions(),
             "hardware": repro.hardware()},
        )
        if git["dirty"]:
            (tmp_path / "git_diff.patch").write_text(git["diff"])
        write_init_std_table(tmp_path / INIT_STD_TABLE, init_stds)
        client.log_artifacts(run_id, tmp, artifact_path="run")


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


def main() -> None:
    """A single run is composed here and never enters Hydra's run mode, which makes its output folder
    before any check could refuse the input; a `-m` grid goes to Hydra once every job composes.
    Hydra's own flags (--help, --cfg job, --info, -cn ...) hand the whole command line to Hydra.
    """
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
        else:
            cfg = compose_run_config(overrides)
    except ConfigError as err:
        _refuse(err)
    if not multirun:
        _run_and_report(cfg, overrides, multirun=False)
        return
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
