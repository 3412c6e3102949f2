"""WISCA through the real entry point: transitions happen, are counted in MLflow, and survive a resume."""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient

from lit_modules.techniques.wisca import callback as wisca_callback
from lit_modules.techniques.wisca import Wisca
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config
from tests.helpers.runs import metric_history


def _train(tmp_path, *overrides: str):
    # Small batches keep each run to a few seconds; the budget is trainer.max_steps=20 as in the issue.
    base = ["regime=steps", "trainer.max_steps=20", f"runs_dir={tmp_path}", "data.batch_size=4",
            "data.val_batches=2"]
    cfg = compose_run_config([*base, *overrides])
    return run(cfg)


def test_periodic_wisca_run_logs_transitions(tmp_path):
    result = _train(tmp_path, "wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=5")
    assert result.status == "FINISHED"
    # After optimizer steps 5, 10, 15 and 20, logged at step - 1.
    expected = [(4, 1.0), (9, 2.0), (14, 3.0), (19, 4.0)]
    assert metric_history(tmp_path, result.run_id, "wisca/transitions") == expected
    ratios = metric_history(tmp_path, result.run_id, "wisca/layer0/qk_l1_ratio")
    assert len(ratios) == 4 and all(v > 0 for _, v in ratios)
    tags = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db").get_run(result.run_id).data.tags
    assert tags["wisca.opt_state"] == "keep" and tags["fidelity.wisca.opt_state"] == "assumed"
    assert tags["fidelity.wisca.every_n_steps"] == "deviates (paper: 250)"


def test_init_and_periodic_channel_wisca_with_muon_and_rescale(tmp_path):
    result = _train(
        tmp_path, "wisca=qk_channel_vo_tensor", "techniques.wisca.every_n_steps=10",
        "techniques.wisca.at_init=true", "techniques.wisca.opt_state=rescale", "optim=muon",
        "model.n_kv_heads=2", "model.attn_gate=headwise", "trainer.max_steps=12",
    )
    assert result.status == "FINISHED"
    assert metric_history(tmp_path, result.run_id, "wisca/transitions") == [(0, 1.0), (9, 2.0)]
    assert len(metric_history(tmp_path, result.run_id, "wisca/layer1/qk_scale_max")) == 2


def test_nadam_with_rescale_trains_through_its_transitions(tmp_path):
    """NAdam's state holds `mu_product` (its momentum schedule): it crashed the first transition before."""
    result = _train(tmp_path, "optim=nadam", "wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=5",
                    "techniques.wisca.opt_state=rescale", "trainer.max_steps=10")
    assert result.status == "FINISHED"
    assert metric_history(tmp_path, result.run_id, "wisca/transitions") == [(4, 1.0), (9, 2.0)]


def test_wisca_on_pc_weights_keeps_the_function_in_a_real_run(tmp_path, monkeypatch):
    """pc_layer=level4 makes o_proj's weight a computed one: through the real entry point, each transition leaves
    the logits unchanged and rescales the Adam state of every weight it moved (o_proj's raw weight too)."""
    changes, policy_calls = [], []
    transition, policy = Wisca.transition, wisca_callback.apply_opt_state_policy

    def measured_transition(self, model):
        idx = torch.arange(48).remainder(97)[None]
        with torch.no_grad():
            before = model(idx)
            out = transition(self, model)
            after = model(idx)
        changes.append(((after - before).abs().max() / before.abs().max()).item())
        return out

    def counted_policy(optimizer, rescales, name):
        policy_calls.append((policy(optimizer, rescales, name), len(rescales)))

    monkeypatch.setattr(Wisca, "transition", measured_transition)
    monkeypatch.setattr(wisca_callback, "apply_opt_state_policy", counted_policy)
    result = _train(tmp_path, "pc_layer=level4", "wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=5",
                    "techniques.wisca.opt_state=rescale", "trainer.max_steps=10")
    assert result.status == "FINISHED"
    assert len(changes) == 2 and max(changes) < 2e-5, changes
    assert policy_calls and all(touched == rescaled for touched, rescaled in policy_calls), policy_calls


@pytest.mark.slow
def test_paused_and_resumed_run_matches_uninterrupted_run(tmp_path):
    """The transition count and last step are checkpointed: a resume (with gradient accumulation, whose
    micro-batches share a global step) neither repeats nor skips a transition, and reproduces the loss."""
    common = ("wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=5", "techniques.wisca.at_init=true",
              "techniques.wisca.opt_state=rescale", "trainer.accumulate_grad_batches=2")
    whole = _train(tmp_path / "whole", *common)
    paused = _train(tmp_path / "split", *common, "trainer.stop_after_steps=10")
    assert paused.status == "KILLED"
    resumed = _train(tmp_path / "split", *common, f"resume={paused.run_id}")
    assert resumed.status == "FINISHED" and resumed.run_id == paused.run_id
    expected = [(0, 1.0), (4, 2.0), (9, 3.0), (14, 4.0), (19, 5.0)]
    assert metric_history(tmp_path / "whole", whole.run_id, "wisca/transitions") == expected
    assert metric_history(tmp_path / "split", resumed.run_id, "wisca/transitions") == expected
    assert resumed.metrics["val/loss"] == whole.metrics["val/loss"]
