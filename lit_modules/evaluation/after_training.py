"""The evaluation a run does when its training ends, on the model as it would be deployed."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from lit_modules.tracking.run_lifecycle import stop_signals_deferred


def evaluate_after_training(cfg: DictConfig, module, techniques, data, client: MlflowClient, run_id: str,
                            step: int) -> dict:
    """lm-eval, probes and sampled metrics per `cfg.eval` on the techniques' inference forms (e.g. merged PC
    weights), logged into the run at its last step; {} when nothing is asked for."""
    eval_cfg = OmegaConf.to_object(cfg.eval)
    if not (eval_cfg.tasks or eval_cfg.probe or eval_cfg.sampled):
        return {}
    from lit_modules.evaluation import evaluate_run, log_outcome

    model = copy.deepcopy(module.model)  # inference transforms may rewrite weights in place
    for technique in techniques:
        model = technique.prepare_for_inference(model)
    with tempfile.TemporaryDirectory() as tmp:
        outcome = evaluate_run(model.eval(), data.tokenizer, data.corpus, eval_cfg, Path(tmp),
                               train_seq_len=cfg.data.seq_len, heldout_tokens=data.shards.heldout_tokens())
        with stop_signals_deferred():  # an interrupt inside a store write would leave the run RUNNING
            log_outcome(client, run_id, outcome, step=max(step - 1, 0))
    return dict(outcome.metrics)
