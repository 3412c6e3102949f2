"""A plain `Llama` as a Hugging Face model folder: config.json, model.safetensors, generation_config.json."""

from __future__ import annotations

import json
from pathlib import Path

from lit_modules.export.tokenizer_files import TokenIds
from lit_modules.hf.config_map import hf_config_from_llama
from lit_modules.hf.folder import SINGLE, write_weights
from lit_modules.hf.names import to_hf
from lit_modules.model import Llama


def write_hf_model(model: Llama, folder: Path, ids: TokenIds) -> None:
    """`model` (plain Linears) into `folder` under Hugging Face's names; transformers loads the same network."""
    config = hf_config_from_llama(model.cfg, ids.bos, ids.eos, ids.pad)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_weights(to_hf(model.state_dict(), model.cfg.tie_embeddings), folder / SINGLE)
    generation = {"bos_token_id": ids.bos, "eos_token_id": ids.eos, "pad_token_id": ids.pad}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
