"""The platform's own export format: `{"model_config": {...}, "state_dict": {...}}`, the merged model's
tensors under the baseline's names, so `load_merged` loads it into a plain `Llama` at the baseline's cost."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lit_modules.export.source import export_source
from lit_modules.export.staging import refuse_existing, refuse_unwritable, staged_file

if TYPE_CHECKING:
    from lit_modules.model import Llama


def export_plain(reference: str, out: Path, runs_dir: str | Path = "runs") -> Path:
    """Write the merged model of the run `reference` names to `out` (complete or not at all)."""
    out = Path(out)
    refuse_existing(out)
    refuse_unwritable(out)
    source = export_source(reference, runs_dir)  # before torch loads: a refusal is a sentence in about a second
    import torch

    weights, _ = source.weights()
    model = source.inference_model(weights)
    with staged_file(out) as temp:
        torch.save({"model_config": source.recorded["model"], "state_dict": model.state_dict()}, temp)
    return out


def load_merged(path: Path) -> Llama:
    """A plain `Llama` (no parametrization) holding the merged weights."""
    import torch

    from lit_modules.model import Llama, LlamaConfig

    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = Llama(LlamaConfig(**saved["model_config"]))
    model.load_state_dict(saved["state_dict"])
    return model
