"""A finished run's model rebuilt: the model a run of its config trains, its trained weights loaded.

    model = trained_model(checkpoint)                   # the run's model with its trained weights
    view = inference_view(finished_run(client, run_id)) # model (inference form), tokenizer, corpus, config, step

This sits beside build.py, above runs/: runs/ reads a finished run's record and verified checkpoint without
the model, the techniques or Lightning; whoever needs the model back (evaluation, export, probes) comes here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lit_modules.runs.finished import FinishedRun, RunCheckpoint, config_on_schema, model_weights


def rebuild_model(cfg: Any, weights: dict | None = None, for_inference: bool = False) -> Any:
    """The model a run of `cfg` trains (techniques' model transforms applied), with `weights` loaded."""
    from lit_modules.build import build_model, build_techniques  # lazy: the model stack loads only here

    techniques = build_techniques(cfg)
    model, _ = build_model(cfg, techniques)
    if weights is not None:
        model.load_state_dict(weights)
    if for_inference:
        for technique in techniques:
            model = technique.prepare_for_inference(model)
    return model


def trained_model(checkpoint: RunCheckpoint, state: dict | None = None, for_inference: bool = False) -> Any:
    """The run's model rebuilt from config.json (with its techniques' model transforms), trained weights
    loaded; `for_inference` applies each technique's inference form (e.g. merged PC weights)."""
    state = checkpoint.state() if state is None else state  # verified before anything is built
    return rebuild_model(config_on_schema(checkpoint.config()), model_weights(state), for_inference)


@dataclass(frozen=True)
class InferenceView:
    """What evaluation and probes need of a run: its model as deployed, tokenizer, corpus, config, step."""

    run_id: str
    model: Any
    tokenizer: Any
    corpus: Any
    config: Any  # the run's config (DictConfig on the current schema)
    eval_config: dict | None  # the run's recorded `eval` node, if any
    step: int  # the optimizer step of the checkpoint


def inference_view(run: FinishedRun) -> InferenceView:
    """Rebuild the model (weights from the verified checkpoint, inference form), tokenizer and corpus."""
    from omegaconf import OmegaConf

    from lit_modules.data import build_tokenizer, prepare_corpus

    state = run.checkpoint.state()  # a damaged checkpoint is refused before anything is built
    cfg = config_on_schema(run.config)
    model = rebuild_model(cfg, model_weights(state), for_inference=True)
    corpus = prepare_corpus(OmegaConf.to_object(cfg.data))
    tokenizer = build_tokenizer(OmegaConf.to_object(cfg.tokenizer), corpus)
    step = int(state.get("global_step", 0))
    return InferenceView(run.run_id, model, tokenizer, corpus, cfg, run.config.get("eval"), step)
