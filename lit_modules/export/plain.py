"""The platform's own export format: `{"model_config": {...}, "state_dict": {...}}`, the merged model's
tensors under the baseline's names, so `load_merged` loads it into a plain `Llama` at the baseline's cost."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from lit_modules.export.source import export_source
from lit_modules.export.staging import refuse_existing
from lit_modules.model import Llama, LlamaConfig


def export_plain(reference: str, out: Path, runs_dir: str | Path = "runs") -> Path:
    """Write the merged model of the run `reference` names to `out` (complete or not at all)."""
    out = Path(out)
    refuse_existing(out)
    source = export_source(reference, runs_dir)
    weights, _ = source.weights()
    model = source.inference_model(weights)
    out.parent.mkdir(parents=True, exist_ok=True)
    temp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    try:
        torch.save({"model_config": source.recorded["model"], "state_dict": model.state_dict()}, temp)
        os.replace(temp, out)
    finally:
        temp.unlink(missing_ok=True)
    return out


def load_merged(path: Path) -> Llama:
    """A plain `Llama` (no parametrization) holding the merged weights."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = Llama(LlamaConfig(**saved["model_config"]))
    model.load_state_dict(saved["state_dict"])
    return model
