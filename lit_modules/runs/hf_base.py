"""A Hugging Face folder as the base of a fine-tune: `python -m lit_modules.finetune base_run=hf:<folder>`.

A folder has no recorded run config, so the base config is the platform's default run with the folder's
model and tokenizer (lit_modules.config.hf_start); the fine-tune recipe then sets data, optimizer and steps as for
any base. It has no MLflow run: nothing to nest under, no pre-training val/loss (NaN).
"""

from __future__ import annotations

from omegaconf import OmegaConf

from lit_modules.config.hf_start import with_hf_start
from lit_modules.hf import HF_PREFIX, hf_folder
from lit_modules.runs.finished import FinishedRun, RunCheckpoint


def hf_base_run(reference: str) -> FinishedRun:
    """The folder as a finished base run (id `hf:<absolute folder>`); ModelFolderError if it cannot be loaded."""
    from lit_modules.config.composition import compose_run_config

    folder = hf_folder(reference)
    cfg = compose_run_config(["tokenizer=pretrained"])
    cfg.init_from = f"{HF_PREFIX}{folder}"  # set, not an override word: any folder name stays one value
    cfg = with_hf_start(cfg)
    folder = hf_folder(cfg.init_from)  # resolved
    config = OmegaConf.to_container(cfg, resolve=True)
    # `checkpoint` points into the folder only to say where the base lives; fine-tuning reads init_from.
    return FinishedRun(run_id=cfg.init_from, name=folder.name, status="FINISHED", tags={}, metrics={},
                       checkpoint=RunCheckpoint(folder / "model.safetensors"), config=config)
