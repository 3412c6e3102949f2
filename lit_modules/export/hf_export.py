"""`python -m lit_modules.export hf <run id | checkpoint> <folder>`: a folder every Hugging Face tool reads.

<folder>: config.json, model.safetensors, generation_config.json, tokenizer.json + tokenizer_config.json (where
the run's tokenizer has them), README.md (the model card); for a LoRA run also adapter/ and adapter_base/
(peft_adapters.py). What cannot be represented is refused before the checkpoint is read (the destination, the
run, its recorded model), or, for a tensor a technique keeps in its inference form, before anything is
written; the folder appears only when complete. The checks load neither torch nor Lightning: a refusal is
a sentence in about a second.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from lit_modules.export.source import ExportSource, export_source
from lit_modules.export.staging import refuse_existing, refuse_unwritable, staged_folder
from lit_modules.hf.config_map import hf_config_from_llama


def checked_source(reference: str, folder: Path, runs_dir: str | Path = "runs") -> ExportSource:
    """The run to export into `folder`, after every check that needs no tensor: the destination is new and
    writable, the run exists with its config, and Hugging Face Llama can hold its recorded model."""
    refuse_existing(folder)
    refuse_unwritable(folder)
    source = export_source(reference, runs_dir)
    hf_config_from_llama(OmegaConf.to_object(source.config.model), None, None, None)  # refuses what HF Llama lacks
    return source


def export_hf(reference: str, folder: Path, runs_dir: str | Path = "runs") -> Path:
    """Write the run `reference` names as a Hugging Face Llama folder at `folder`; returns `folder`."""
    folder = Path(folder)
    source = checked_source(reference, folder, runs_dir)
    # The model stack (torch, the techniques, Lightning through build) loads only for a run that will export.
    from lit_modules.export.hf_model import write_hf_model
    from lit_modules.export.model_card import model_card
    from lit_modules.export.peft_adapters import has_adapters, write_peft_adapters
    from lit_modules.export.tokenizer_files import write_tokenizer_files
    from lit_modules.hf.names import refuse_unnamed

    cfg = source.config
    adapters = has_adapters(source)
    weights, step = source.weights()  # verified first
    model = source.inference_model(weights)
    refuse_unnamed(model.state_dict())  # a tensor a technique kept that HF Llama lacks: before anything is written
    with staged_folder(folder) as temp:
        tokenizer = write_tokenizer_files(cfg, temp)
        write_hf_model(model, temp, tokenizer.ids)
        if adapters:
            write_peft_adapters(source, weights, temp, folder, tokenizer.ids)
        (temp / "README.md").write_text(model_card(source, model, step, tokenizer.note, adapters))
    return folder
