"""What an export reads: the run a reference names (an MLflow run id, a checkpoint file or its folder), its
recorded config and MLflow tags, and the models rebuilt from its verified checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from lit_modules.config.errors import ConfigError
from lit_modules.rebuild import rebuild_model
from lit_modules.runs.finished import RunCheckpoint, config_on_schema, finished_run, model_weights
from lit_modules.runs.store import open_store

if TYPE_CHECKING:  # torch loads with the model: finding the run and refusing it loads none of it
    from torch import nn

RUNS_DIR_FLAG = "--runs-dir <the folder the run was trained in>"  # the export's way to name the store


@dataclass
class ExportSource:
    reference: str  # as the user gave it, for sentences
    checkpoint: RunCheckpoint
    run_id: str
    recorded: dict  # the resolved config the run trained with (config.json)
    tags: dict[str, str]  # the MLflow run's tags; empty when the store does not have the run

    @property
    def config(self) -> DictConfig:
        return config_on_schema(self.recorded)

    def weights(self) -> tuple[dict, int]:
        """(the network's trained tensors, the optimizer step), read only after the checksum is verified."""
        state = self.checkpoint.state()
        return model_weights(state), int(state.get("global_step", 0))

    def inference_model(self, weights: dict) -> nn.Module:
        """The trained model with every technique's inference form applied (what evaluation scores)."""
        model = rebuild_model(self.config, weights, for_inference=True)
        refuse_parametrized(model, self.reference)
        return model.eval()


def refuse_parametrized(model: nn.Module, reference: str) -> None:
    from torch.nn.utils import parametrize

    if any(parametrize.is_parametrized(m) for m in model.modules()):
        raise ConfigError(f"The run of {reference} still has parametrized weights after every technique's "
                          "prepare_for_inference; it cannot be exported as a plain model.")


def export_source(reference: str, runs_dir: str | Path = "runs") -> ExportSource:
    """The run `reference` names; ConfigError (one sentence) when it names none or lacks its config.json."""
    path = Path(reference)
    if path.is_file() or (path.is_dir() and RunCheckpoint.in_folder(path).path.is_file()):
        checkpoint = RunCheckpoint(path) if path.is_file() else RunCheckpoint.in_folder(path)
        if not checkpoint.sidecar.is_file():
            raise ConfigError(f"{checkpoint.sidecar} is missing; it holds the run's config needed to rebuild the model.")
        record = checkpoint.record()
        run_id = record.get("mlflow_run_id", "")
        stores = [runs_dir, record["config"].get("runs_dir")]
        return ExportSource(reference, checkpoint, run_id, record["config"], _tags_if_recorded(run_id, stores))
    if path.exists() or "/" in reference:
        raise ConfigError(f"{reference} is neither a checkpoint nor a folder holding last.ckpt.")
    run = finished_run(open_store(runs_dir, runs_dir_word=RUNS_DIR_FLAG), reference, key="")
    return ExportSource(reference, run.checkpoint, run.run_id, run.config, run.tags)


def _tags_if_recorded(run_id: str, stores: list) -> dict[str, str]:
    """The run's tags from the first store that has it (a copied checkpoint may have none: {})."""
    for runs_dir in dict.fromkeys(s for s in stores if s):
        try:
            return dict(open_store(runs_dir).get_run(run_id).data.tags)
        except Exception:  # noqa: BLE001 - no store there, or not this run: the card says "unknown"
            continue
    return {}
