"""Hugging Face Llama folders in: `init_from=hf:<folder>` (and `finetune base_run=hf:<folder>`).

    config_map.py   config.json <-> LlamaConfig, and the one-sentence refusal of what we cannot represent
    names.py        our parameter names <-> Hugging Face Llama's
    folder.py       reading a local folder's config and (sharded) safetensors; writing safetensors
    start.py        a run config whose model and tokenizer come from the folder named by init_from
    base_run.py     a folder as the base of a fine-tune (lit_modules.finetune)

Local folders only: nothing is fetched from a hub. The way out is lit_modules.export.
"""

from __future__ import annotations

from pathlib import Path

HF_PREFIX = "hf:"  # init_from=hf:<folder>, base_run=hf:<folder>


def is_hf_reference(reference: object) -> bool:
    return isinstance(reference, str) and reference.startswith(HF_PREFIX)


def hf_folder(reference: str) -> Path:
    """The folder of `hf:<folder>` (not checked here: folder.read_hf_config refuses a missing one)."""
    return Path(reference[len(HF_PREFIX):]).expanduser()
