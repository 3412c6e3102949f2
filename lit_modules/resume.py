"""Find what `resume=<checkpoint or MLflow run id>` points at and rebuild that run's config."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from lit_modules.config.errors import ConfigError
from lit_modules.config.schema import Config

CHECKPOINT_DIR_TAG = "checkpoint_dir"
CONFIG_SIDECAR = "config.json"
# Settings that may change between the first part of a run and its continuation.
RESUMABLE_OVERRIDES = ("trainer.stop_after_steps", "trainer.num_threads", "resume", "dry_run")


@dataclass
class ResumeTarget:
    checkpoint: Path
    run_id: str
    config: DictConfig


def find_checkpoint(reference: str, client: MlflowClient) -> Path:
    """A checkpoint file, a folder holding last.ckpt, or an MLflow run id whose run recorded one."""
    return _checkpoint_from(reference, client)


def load_weights(model: torch.nn.Module, checkpoint: Path) -> None:
    """Model weights only (no optimizer, no step): the start of a new run from a finished one."""
    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)["state_dict"]
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file
        raise ConfigError(f"The checkpoint {checkpoint} cannot be read as a training checkpoint.") from err
    weights = {k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if missing or unexpected:
        raise ConfigError(
            f"The checkpoint {checkpoint} does not fit this model (missing {len(missing)}, unexpected "
            f"{len(unexpected)} tensors); build the same model and techniques as the run that wrote it."
        )


def _checkpoint_from(resume: str, client: MlflowClient) -> Path:
    path = Path(resume)
    if path.is_file():
        return path
    if path.is_dir() and (path / "last.ckpt").is_file():
        return path / "last.ckpt"
    try:
        run = client.get_run(resume)
    except Exception as err:  # noqa: BLE001 - any lookup failure means the same thing to the user
        raise ConfigError(f"'{resume}' is neither a checkpoint file nor a known MLflow run id.") from err
    directory = run.data.tags.get(CHECKPOINT_DIR_TAG)
    if not directory or not (Path(directory) / "last.ckpt").is_file():
        raise ConfigError(f"MLflow run {resume} has no checkpoint to resume from (looked in {directory}).")
    return Path(directory) / "last.ckpt"


def resolve_resume(cfg: DictConfig, client: MlflowClient, cli_overrides: list[str] | None) -> ResumeTarget:
    checkpoint = _checkpoint_from(str(cfg.resume), client)
    sidecar = checkpoint.parent / CONFIG_SIDECAR
    if not sidecar.is_file():
        raise ConfigError(f"The checkpoint folder {checkpoint.parent} lacks its {CONFIG_SIDECAR}; it cannot be resumed.")
    record = json.loads(sidecar.read_text())
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
    return ResumeTarget(checkpoint=checkpoint, run_id=record["mlflow_run_id"], config=stored)
