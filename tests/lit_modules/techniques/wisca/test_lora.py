"""WISCA on LoRA adapters: B @ A rebalanced (tensor and per-rank-channel L1) without changing the function, its
optimizer-state policies, its periodic transitions in a real run, and its refusals."""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validated
from lit_modules.techniques.lora import Lora
from lit_modules.techniques.lora.adapter import adapters
from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.opt_state import apply_opt_state_policy
from lit_modules.train import run
from tests.helpers.models import small_llama, token_batch
from tests.helpers.runs import tiny_overrides


def trained_looking_adapters(variant: str = "lora"):
    model = Lora(variant=variant, rank=4, alpha=8.0).transform_loaded_model(small_llama())
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():  # unbalanced on purpose: B much larger than A in some rank channels
        for _, a in adapters(model):
            a.lora_A.mul_(0.05).add_(0.01 * torch.randn(a.lora_A.shape, generator=g))
            a.lora_B.add_(torch.randn(a.lora_B.shape, generator=g) * torch.tensor([3.0, 0.5, 1.0, 0.1]))
    return model


@pytest.mark.parametrize("variant", ["lora", "rslora", "pissa"])
@pytest.mark.parametrize("granularity", ["tensor", "channel"])
def test_a_transition_balances_the_factors_and_keeps_the_logits(variant, granularity):
    model = trained_looking_adapters(variant)
    x = token_batch(model)
    with torch.no_grad():
        before = model(x)
        products = [a.lora_B @ a.lora_A for _, a in adapters(model)]
    wisca = Wisca(qk=False, vo=False, lora=True, lora_granularity=granularity)
    rescales, metrics = wisca.transition(model)
    assert len(rescales) == 2 * len(adapters(model))
    with torch.no_grad():
        torch.testing.assert_close(model(x), before, rtol=0, atol=2e-6)
        for (_, a), product in zip(adapters(model), products):
            torch.testing.assert_close(a.lora_B @ a.lora_A, product, rtol=1e-6, atol=1e-7)
            if granularity == "tensor":
                torch.testing.assert_close(a.lora_B.abs().sum(), a.lora_A.abs().sum(), rtol=1e-5, atol=0)
            else:
                torch.testing.assert_close(a.lora_B.abs().sum(0), a.lora_A.abs().sum(1), rtol=1e-5, atol=0)
    assert any(k.endswith("/lora_l1_ratio") for k in metrics)


def test_zero_b_at_a_lora_start_is_left_alone():
    model = Lora(rank=2).transform_loaded_model(small_llama())
    rescales, _ = Wisca(qk=False, vo=False, lora=True).transition(model)
    assert all(float(r.factor) == 1.0 for r in rescales)


def test_rescale_policy_divides_the_moments_by_the_factor():
    model = trained_looking_adapters()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    model(token_batch(model)).logsumexp(-1).mean().backward()
    optimizer.step()
    adapter = adapters(model)[0][1]
    m_before = optimizer.state[adapter.lora_B]["exp_avg"].clone()
    v_before = optimizer.state[adapter.lora_B]["exp_avg_sq"].clone()
    rescales, _ = Wisca(qk=False, vo=False, lora=True, lora_granularity="channel").transition(model)
    assert apply_opt_state_policy(optimizer, rescales, "rescale") == len(rescales)
    factor = next(r.factor for r in rescales if r.param is adapter.lora_B)
    assert factor.shape == (1, 4)
    torch.testing.assert_close(optimizer.state[adapter.lora_B]["exp_avg"], m_before / factor)
    torch.testing.assert_close(optimizer.state[adapter.lora_B]["exp_avg_sq"], v_before / factor**2)


def test_periodic_lora_transitions_in_a_run(tmp_path):
    overrides = tiny_overrides(tmp_path, steps=10, lora="lora", wisca="lora_channel",
                               **{"techniques.lora.from_scratch": "true", "techniques.wisca.every_n_steps": "4",
                                  "techniques.wisca.opt_state": "rescale"})
    result = run(compose_run_config(overrides))
    assert result.status == "FINISHED"
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    transitions = [(m.step, m.value) for m in client.get_metric_history(result.run_id, "wisca/transitions")]
    assert sorted(transitions) == [(3, 1.0), (7, 2.0)]
    scales = client.get_metric_history(result.run_id, "wisca/layers.0.attn.q_proj/lora_scale_max")
    assert len(scales) == 2
    tags = client.get_run(result.run_id).data.tags
    assert tags["wisca.lora_granularity"] == "channel" and tags["fidelity.wisca.lora"] == "assumed"


@pytest.mark.parametrize(
    "overrides,words",
    [
        ({"wisca": "lora_tensor"}, "this run has none; add lora=lora"),
        ({"wisca": "qk_tensor", "lora": "lora"}, "cannot rescale q_proj and k_proj exactly: its LoRA adapter"),
        ({"wisca": "lora_tensor", "lora": "lora", "techniques.wisca.at_init": "true"}, "at_init=true transitions before"),
        ({"wisca": "qk_vo_tensor", "optim": "adam_mini", "techniques.wisca.opt_state": "rescale"}, "use techniques.wisca.opt_state=keep"),
    ],
)
def test_wisca_on_lora_refusals(tmp_path, overrides, words):
    cfg = compose_run_config(tiny_overrides(tmp_path, **{"techniques.lora.from_scratch": "true"} if "lora" in overrides else {}, **overrides))
    with pytest.raises(ConfigError, match=words):
        validated(cfg)
