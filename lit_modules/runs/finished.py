"""A run after training as resume, evaluation, fine-tuning, probes and the PC export read it.

    run = finished_run(client, run_id, key="run")       # its MLflow record and its checkpoint folder
    checkpoint = RunCheckpoint(Path(".../last.ckpt"))   # a checkpoint path: resume, init_from, the PC export
    state = checkpoint.state()                          # its contents, checksum verified

The model itself is rebuilt above runs/, by lit_modules.rebuild (trained_model, inference_view): this module
loads neither the model, the techniques nor Lightning.

A run's checkpoint folder (tag `checkpoint_dir`) holds `last.ckpt`, its checksum `last.ckpt.sha256` and
`config.json` (the resolved config, the run id and the config hash). The checkpoint is read only through
`verified_checkpoint.load_verified_checkpoint`: one that does not match its checksum is refused in one
sentence before anything is built. Refusals are ConfigErrors (exit code 2) that name the argument
(`run=`, `base_run=`) the user gave.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from lit_modules.config.errors import ConfigError
from lit_modules.runs import tags
from lit_modules.runs.uri_masking import mask_password
from lit_modules.verified_checkpoint import load_verified_checkpoint, verify_checkpoint

if TYPE_CHECKING:  # the client is made by whoever opens the store: MLflow loads there (about a second)
    from mlflow.tracking import MlflowClient

CHECKPOINT_FILE = "last.ckpt"
CONFIG_SIDECAR = "config.json"
MODULE_PREFIX = "model."  # CausalLMModule keeps the network at `.model`


@dataclass(frozen=True)
class RunCheckpoint:
    """A checkpoint file and the `config.json` beside it."""

    path: Path

    @classmethod
    def in_folder(cls, directory: str | Path) -> RunCheckpoint:
        return cls(Path(directory) / CHECKPOINT_FILE)

    @property
    def sidecar(self) -> Path:
        return self.path.parent / CONFIG_SIDECAR

    def complete(self) -> bool:
        """Both the checkpoint and its config.json exist (their integrity is checked when read)."""
        return self.path.is_file() and self.sidecar.is_file()

    def record(self) -> dict:
        """config.json: `config` (the resolved run config), `mlflow_run_id`, `config_hash`; a damaged file is a
        ConfigError naming it."""
        try:
            record = json.loads(self.sidecar.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ConfigError(f"{self.sidecar} cannot be read as the run's config ({_why(err)}); restore it from a "
                              "copy of the run's checkpoint folder.") from None
        if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
            raise ConfigError(f"{self.sidecar} holds no run config (no 'config' mapping); restore it from a copy of "
                              "the run's checkpoint folder.")
        return record

    def config(self) -> dict:
        return self.record()["config"]

    def verify(self) -> str:
        return verify_checkpoint(self.path)

    def state(self) -> dict:
        """The checkpoint's contents, read only after its checksum has been verified (CheckpointError)."""
        return load_verified_checkpoint(self.path)


def _why(err: Exception) -> str:
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON: {err.msg} at line {err.lineno}"
    return getattr(err, "strerror", None) or type(err).__name__


def model_weights(state: dict) -> dict:
    """The network's tensors of a training checkpoint, under the network's own parameter names."""
    return {k.removeprefix(MODULE_PREFIX): v for k, v in state["state_dict"].items() if k.startswith(MODULE_PREFIX)}


def config_on_schema(recorded: dict):
    """A recorded config on the current schema; top-level keys the schema no longer has are dropped."""
    from omegaconf import OmegaConf

    from lit_modules.config.schema import Config

    known = {f.name for f in fields(Config)}
    return OmegaConf.merge(OmegaConf.structured(Config), {k: v for k, v in recorded.items() if k in known})


@dataclass(frozen=True)
class FinishedRun:
    """A run's MLflow record (what the tools read of it) and its checkpoint folder."""

    run_id: str
    name: str
    status: str
    tags: dict[str, str]
    metrics: dict[str, float]
    checkpoint: RunCheckpoint
    config: dict  # the resolved config the run trained with, as recorded in config.json

    @property
    def parent_id(self) -> str | None:
        return self.tags.get(tags.PARENT)

    def metric(self, key: str) -> float:
        """The run's final value of a metric (NaN if it never logged one)."""
        return float(self.metrics.get(key, math.nan))


def finished_run(client: MlflowClient, run_id: str, key: str = "run", require_finished: bool = False) -> FinishedRun:
    """The run `key=<run_id>` names, with its checkpoint folder; ConfigError (one sentence naming `key`) when
    the store has no such run, it has not FINISHED (with `require_finished`), or its checkpoint is missing.
    `key` empty: the id was a positional word (the export's), named alone."""
    named = f"{key}={run_id}" if key else run_id
    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - any lookup failure means the same thing to the user
        raise ConfigError(
            f"{named} is not a run in the MLflow store {mask_password(client.tracking_uri)}; pass the id of a finished run."
        ) from None
    if require_finished and run.info.status != "FINISHED":
        raise ConfigError(f"{named} is {run.info.status}, not FINISHED; only a finished run can be used here.")
    directory = run.data.tags.get(tags.CHECKPOINT_DIR)
    checkpoint = RunCheckpoint.in_folder(directory or "")
    if not directory or not checkpoint.complete():
        raise ConfigError(
            f"{named} has no checkpoint (looked for {CHECKPOINT_FILE} and {CONFIG_SIDECAR} in {directory})."
        )
    metrics = {k: float(v) for k, v in run.data.metrics.items()}
    return FinishedRun(run_id, run.info.run_name or run_id[:8], run.info.status, dict(run.data.tags), metrics,
                       checkpoint, checkpoint.config())
