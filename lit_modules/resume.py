"""Find what `resume=` or `init_from=` (a checkpoint or an MLflow run id) points at, verified; for resume,
rebuild that run's config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from lit_modules.config.errors import ConfigError
from lit_modules.config.schema import Config
from lit_modules.hf import hf_folder, is_hf_reference
from lit_modules.runs import tags
from lit_modules.runs.finished import CONFIG_SIDECAR, MODULE_PREFIX, RunCheckpoint, model_weights

if TYPE_CHECKING:  # torch and MLflow load where they are used: check_resume_reference runs before either
    import torch
    from mlflow.tracking import MlflowClient
# Settings that may change between the first part of a run and its continuation.
RESUMABLE_OVERRIDES = ("trainer.stop_after_steps", "trainer.num_threads", "resume", "dry_run")


@dataclass
class ResumeTarget:
    checkpoint: Path
    run_id: str
    config: DictConfig


@dataclass
class InitWeights:
    """Model weights only (no optimizer, no step): the start of a new run from a finished one."""

    checkpoint: Path
    state_dict: dict

    def load_into(self, model: torch.nn.Module) -> None:
        weights = model_weights({"state_dict": self.state_dict})
        own = model.state_dict()
        # load_state_dict raises a multi-line RuntimeError on a shape mismatch: say the first one instead.
        for name, tensor in weights.items():
            if name in own and own[name].shape != tensor.shape:
                raise ConfigError(
                    f"The checkpoint {self.checkpoint} does not fit this model: {name} is "
                    f"{tuple(tensor.shape)} there and {tuple(own[name].shape)} here; build the same model "
                    "(model=..., its sizes) as the run that wrote it."
                )
        missing, unexpected = model.load_state_dict(weights, strict=False)
        if missing or unexpected:
            raise ConfigError(
                f"The checkpoint {self.checkpoint} does not fit this model (missing {len(missing)}, "
                f"unexpected {len(unexpected)} tensors); build the same model and techniques as the run "
                "that wrote it."
            )


def init_weights_from(reference: str, client: MlflowClient | None) -> InitWeights:
    """`init_from=`: a checkpoint file, a folder holding last.ckpt, a run id (read only if verified), or
    `hf:<folder>` (a Hugging Face Llama folder, checked against its config.json)."""
    if is_hf_reference(reference):
        from lit_modules.hf.start import init_weights

        weights = init_weights(reference)
        return InitWeights(hf_folder(reference), {MODULE_PREFIX + k: v for k, v in weights.items()})
    checkpoint = _checkpoint_from(reference, client, nothing="it has no weights for init_from")
    state = checkpoint.state()
    if "state_dict" not in state:
        raise ConfigError(f"The checkpoint {checkpoint.path} holds no model weights (no 'state_dict').")
    return InitWeights(checkpoint.path, state["state_dict"])


NOTHING_TO_RESUME = "there is nothing to resume; start the run again without resume="


def _local_checkpoint(reference: str) -> RunCheckpoint | None:
    """The checkpoint `reference` names as a file or a folder holding last.ckpt; None if it names none."""
    path = Path(reference)
    if path.is_file():
        return RunCheckpoint(path)
    if path.is_dir() and RunCheckpoint.in_folder(path).path.is_file():
        return RunCheckpoint.in_folder(path)
    return None


def _no_store(reference: str) -> ConfigError:
    return ConfigError(f"'{reference}' is neither a checkpoint file nor a known MLflow run id (the MLflow store "
                       "does not exist yet; pass runs_dir=<the folder the run was trained in>).")


def _get_run(client: MlflowClient, reference: str):
    try:
        return client.get_run(reference)
    except Exception as err:  # noqa: BLE001 - any lookup failure means the same thing to the user
        raise ConfigError(f"'{reference}' is neither a checkpoint file nor a known MLflow run id.") from err


def check_resume_reference(cfg: DictConfig) -> None:
    """`resume=` names a checkpoint (file or folder) or a run of an existing store: refused in one sentence
    before the training stack loads (Lightning alone is seconds). Read only; whether the run has a checkpoint,
    and everything else, is resolve_resume's, after the stack loaded."""
    reference = str(cfg.resume)
    if _local_checkpoint(reference) is not None:
        return
    from lit_modules.runs.store import store_exists
    from lit_modules.runs.store_check import check_store
    from lit_modules.tracking.store import resolve_tracking_uri

    uri = resolve_tracking_uri(cfg.logger.tracking_uri, cfg.runs_dir)
    if not store_exists(uri):
        raise _no_store(reference)
    check_store(uri)  # before a client exists: a server that does not answer is one sentence too
    from mlflow.tracking import MlflowClient

    _get_run(MlflowClient(uri), reference)


def _checkpoint_from(resume: str, client: MlflowClient | None, nothing: str = NOTHING_TO_RESUME) -> RunCheckpoint:
    """`client` None: the local store is not made yet, so no run id can be found in it."""
    from lit_modules.tracking.run_owner import Owner, end_if_dead, owner_of

    local = _local_checkpoint(resume)
    if local is not None:
        return local
    if client is None:
        raise _no_store(resume)
    run = _get_run(client, resume)
    directory = run.data.tags.get(tags.CHECKPOINT_DIR)
    if not directory or not RunCheckpoint.in_folder(directory).path.is_file():
        if run.info.status == "RUNNING" and owner_of(run, directory) is Owner.ALIVE:
            raise ConfigError(
                f"MLflow run {resume} is being trained right now and has no checkpoint yet; wait for it."
            )
        # Restarting from step 0 in this run would log every step twice (MLflow cannot delete metric
        # history), so a run with nothing to resume is ended instead and trained again as a new run.
        ended = end_if_dead(client, run, directory, found_by="resume")
        status = "marked KILLED now" if ended else run.info.status
        raise ConfigError(f"MLflow run {resume} ({status}) stopped before its first checkpoint, so {nothing}.")
    return RunCheckpoint.in_folder(directory)


def _refuse_if_trained_now(client: MlflowClient | None, run_id: str) -> None:
    if client is None:  # no store here yet: nothing in it is being trained
        return
    from lit_modules.tracking.run_owner import Owner, owner_of

    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - a checkpoint copied from another store: nothing to check here
        return
    if run.info.status == "RUNNING" and owner_of(run, run.data.tags.get(tags.CHECKPOINT_DIR)) is Owner.ALIVE:
        raise ConfigError(
            f"MLflow run {run_id} is being trained by another process right now; wait for it to end."
        )


def resolve_resume(cfg: DictConfig, client: MlflowClient | None, cli_overrides: list[str] | None) -> ResumeTarget:
    checkpoint = _checkpoint_from(str(cfg.resume), client)
    if not checkpoint.sidecar.is_file():
        raise ConfigError(f"The checkpoint folder {checkpoint.path.parent} lacks its {CONFIG_SIDECAR}; it cannot be resumed.")
    record = checkpoint.record()
    _refuse_if_trained_now(client, record["mlflow_run_id"])
    checkpoint.verify()  # before the run's status changes: a damaged checkpoint leaves it as it was
    _refuse_manual_optimization_steps(checkpoint.path)
    stored = OmegaConf.merge(OmegaConf.structured(Config), record["config"])
    current = OmegaConf.to_container(cfg, resolve=True)
    # First, so that a group override (trainer=...) is compared without the settings that may change.
    for key in RESUMABLE_OVERRIDES:
        value = OmegaConf.select(cfg, key)
        OmegaConf.update(stored, key, value)
    stored.eval = cfg.eval  # what to evaluate at the end may change; what was trained may not
    stored.logger = cfg.logger  # the store as this command reaches it (the record masks URL passwords)
    for override in cli_overrides or []:
        key = override.lstrip("+~").split("=", 1)[0]
        if key in RESUMABLE_OVERRIDES or key.split(".")[0] in ("hydra", "eval", "logger"):
            continue
        if OmegaConf.select(stored, key) != OmegaConf.select(OmegaConf.create(current), key):
            raise ConfigError(
                f"resume continues the recorded run; '{key}' differs from its recorded value, "
                "so start a new run instead."
            )
    return ResumeTarget(checkpoint=checkpoint.path, run_id=record["mlflow_run_id"], config=stored)


def _refuse_manual_optimization_steps(checkpoint: Path) -> None:
    """An earlier training step stepped the optimizer itself (Lightning's manual optimization); Lightning counts
    those steps apart from its automatic loop's, which would restart at step 0 on the restored weights, so such
    a checkpoint is refused before anything changes."""
    import torch

    try:  # mmap: only the loop counters are read, not the weights
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # noqa: BLE001 - a foreign file with a matching checksum someone wrote
        raise ConfigError(f"The checkpoint {checkpoint} matches its checksum but cannot be read as a training "
                          f"checkpoint ({type(err).__name__}).") from err
    # Lightning's checkpoint format: the fit loop's state, with each kind of optimization's progress counters.
    fit_loop = state.get("loops", {}).get("fit_loop", {})
    steps = fit_loop.get("epoch_loop.manual_optimization.optim_step_progress", {}).get("total", {}).get("completed")
    if steps:
        raise ConfigError(
            f"The checkpoint {checkpoint} was written by an earlier version of the training step (Lightning's "
            f"manual optimization, {steps} steps), which this version cannot continue; finish the run with the "
            "commit in its git_commit tag, or train it again without resume=."
        )
