"""When WISCA transitions: every n steps once per step, at init (logged at step 0), and across a resume."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.callback import WiscaTransitions
from tests.helpers.wisca import attn_weights, tokens, unbalanced_model


# ------------------------------------------------------------------ the callback


class _Logger:
    def __init__(self):
        self.calls: list[tuple[dict, int]] = []

    def log_metrics(self, metrics, step):
        self.calls.append((dict(metrics), step))


def _fake_trainer(step: int, logger: _Logger, optimizers=()) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, logger=logger, optimizers=list(optimizers))


def test_callback_transitions_every_n_steps_once_per_step():
    model = unbalanced_model()
    module = SimpleNamespace(model=model)
    technique = Wisca(every_n_steps=5)
    callback, logger = technique.callbacks()[0], _Logger()
    idx = tokens()
    before = model(idx)
    for step in (0, 1, 4, 5, 5, 6, 10, 10):  # repeated steps = gradient-accumulation micro-batches
        callback.on_train_batch_end(_fake_trainer(step, logger), module, None, None, 0)
    assert callback.transitions == 2
    assert [(c[0]["wisca/transitions"], c[1]) for c in logger.calls] == [(1.0, 4), (2.0, 9)]
    assert {"wisca/layer0/qk_l1_ratio", "wisca/layer1/vo_scale"} <= set(logger.calls[0][0])
    assert logger.calls[0][0]["wisca/layer0/qk_l1_ratio"] != pytest.approx(1.0)
    assert logger.calls[1][0]["wisca/layer0/qk_l1_ratio"] == pytest.approx(1.0)  # balanced by the first
    torch.testing.assert_close(model(idx), before, rtol=1e-5, atol=1e-5)

    # A resumed run restores the count and the last step, so step 10 is not transitioned again.
    resumed = WiscaTransitions(technique)
    resumed.load_state_dict(callback.state_dict())
    resumed.on_train_batch_end(_fake_trainer(10, logger), module, None, None, 0)
    resumed.on_train_start(_fake_trainer(10, logger), module)
    assert resumed.transitions == 2 and len(logger.calls) == 2


def test_init_transition_in_transform_model_is_logged_at_step_zero():
    model = unbalanced_model()
    idx = tokens()
    before = model(idx)
    technique = Wisca(every_n_steps=0, at_init=True)
    assert technique.transform_model(model) is model
    torch.testing.assert_close(model(idx), before, rtol=1e-5, atol=1e-5)
    callback, logger = technique.callbacks()[0], _Logger()
    callback.on_train_start(_fake_trainer(0, logger), SimpleNamespace(model=model))
    (metrics, step), = logger.calls
    assert step == 0 and metrics["wisca/transitions"] == 1.0 and metrics["wisca/layer0/qk_l1_ratio"] > 2
    for s in (250, 500):  # never periodic
        callback.on_train_batch_end(_fake_trainer(s, logger), SimpleNamespace(model=model), None, None, 0)
    assert callback.transitions == 1 and len(logger.calls) == 1


def test_without_at_init_transform_model_is_identity():
    model = unbalanced_model()
    weights = attn_weights(model)
    Wisca(at_init=False).transform_model(model)
    for layer, before in zip(model.layers, weights):
        assert all(torch.equal(w, getattr(layer.attn, n).weight) for n, w in before.items())
