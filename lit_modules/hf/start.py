"""A run that starts from a Hugging Face Llama folder, its weights: `init_from=hf:<folder>`.

The run config's half (model and tokenizer from the folder, checked before any data is read) is
lit_modules.config.hf_start, which validation calls; the weights are read here, after the run's checks.
"""

from __future__ import annotations

from pathlib import Path

import torch

from lit_modules.hf import hf_folder
from lit_modules.hf.folder import read_hf_config, read_weights


def init_weights(reference: str) -> dict[str, torch.Tensor]:
    """The folder's weights under our parameter names (float32), checked against its config.json."""
    folder = hf_folder(reference)
    _, model = read_hf_config(folder)
    return read_weights(Path(folder), model)
