"""Hugging Face Llama folders in: `init_from=hf:<folder>` (and `finetune base_run=hf:<folder>`).

    config_map.py   config.json <-> LlamaConfig, and the one-sentence refusal of what we cannot represent
    names.py        our parameter names <-> Hugging Face Llama's
    folder.py       reading a local folder's config and (sharded) safetensors; writing safetensors
    start.py        the folder's weights for init_from (the run config's half is config/hf_start.py)

A folder as the base of a fine-tune is lit_modules.runs.hf_base. Local folders only: nothing is fetched from a
hub. The way out is lit_modules.export. This package sits just above model/ and below config/ (validation
reads a folder through config/hf_start.py), so it imports neither config/, data/ nor runs/.
"""

from __future__ import annotations

from pathlib import Path

from lit_modules.errors import DataError

HF_PREFIX = "hf:"  # init_from=hf:<folder>, base_run=hf:<folder>


class ModelFolderError(DataError):
    """A Hugging Face folder that cannot be loaded or written: one sentence, exit 2 (a DataError, so every
    entry point reports it as the bad input it is)."""


def is_hf_reference(reference: object) -> bool:
    return isinstance(reference, str) and reference.startswith(HF_PREFIX)


def hf_folder(reference: str) -> Path:
    """The folder of `hf:<folder>` (not checked here: folder.read_hf_config refuses a missing one)."""
    return Path(reference[len(HF_PREFIX):]).expanduser()
