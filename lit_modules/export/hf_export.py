"""`python -m lit_modules.export hf <run id | checkpoint> <folder>`: a folder every Hugging Face tool reads.

<folder>: config.json, model.safetensors, generation_config.json, tokenizer.json + tokenizer_config.json (where
the run's tokenizer has them), README.md (the model card); for a LoRA run also adapter/ and adapter_base/
(peft_adapters.py). What cannot be represented is refused before the checkpoint is read, and the folder
appears only when complete.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from lit_modules.export.hf_model import write_hf_model
from lit_modules.export.model_card import model_card
from lit_modules.export.peft_adapters import has_adapters, write_peft_adapters
from lit_modules.export.source import export_source
from lit_modules.export.staging import refuse_existing, staged_folder
from lit_modules.export.tokenizer_files import write_tokenizer_files
from lit_modules.hf.config_map import hf_config_from_llama


def export_hf(reference: str, folder: Path, runs_dir: str | Path = "runs") -> Path:
    """Write the run `reference` names as a Hugging Face Llama folder at `folder`; returns `folder`."""
    folder = Path(folder)
    refuse_existing(folder)
    source = export_source(reference, runs_dir)
    cfg = source.config
    hf_config_from_llama(OmegaConf.to_object(cfg.model), None, None, None)  # refuses what HF Llama lacks
    adapters = has_adapters(source)
    weights, step = source.weights()  # verified first
    model = source.inference_model(weights)
    with staged_folder(folder) as temp:
        tokenizer = write_tokenizer_files(cfg, temp)
        write_hf_model(model, temp, tokenizer.ids)
        if adapters:
            write_peft_adapters(source, weights, temp, folder, tokenizer.ids)
        (temp / "README.md").write_text(model_card(source, model, step, tokenizer.note, adapters))
    return folder
