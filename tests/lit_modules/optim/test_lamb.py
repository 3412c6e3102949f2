"""LAMB on known cases (trust ratio ||p|| / ||r||, decay inside r) and NAdam as built from the config."""

from __future__ import annotations

import math

import pytest
import torch

from lit_modules.config.schema import OptimConfig
from lit_modules.optim.build import build_optimizer
from lit_modules.optim.lamb import Lamb
from tests.helpers.models import small_llama


def lamb_step(p0, grad, wd=0.0, lr=0.1, trust_no_decay=False):
    p = torch.nn.Parameter(torch.tensor(p0))
    opt = Lamb([{"params": [p], "weight_decay": wd}], lr=lr, betas=(0.9, 0.999), eps=0.0,
               trust_no_decay=trust_no_decay)
    p.grad = torch.tensor(grad)
    opt.step()
    return p.detach()


def test_first_step_is_the_sign_scaled_by_the_trust_ratio():
    # m_hat = g, v_hat = g^2: r = sign(g) = [1, -1]; ||p|| = 5, ||r|| = sqrt(2). Without decay only when asked.
    p = lamb_step([3.0, 4.0], [1.0, -2.0], trust_no_decay=True)
    trust = 5 / math.sqrt(2)
    torch.testing.assert_close(p, torch.tensor([3.0 - 0.1 * trust, 4.0 + 0.1 * trust]))


def test_a_tensor_without_decay_takes_the_plain_adam_step_by_default():
    """NVIDIA apex (use_nvlamb=False) and TF-Addons: no trust ratio where there is no decay (norm gains)."""
    torch.testing.assert_close(lamb_step([3.0, 4.0], [1.0, -2.0]), torch.tensor([3.0 - 0.1, 4.0 + 0.1]))


def test_decay_is_part_of_the_normalized_update():
    p = lamb_step([3.0, 4.0], [1.0, -2.0], wd=0.5)
    r = torch.tensor([1.0 + 1.5, -1.0 + 2.0])
    torch.testing.assert_close(p, torch.tensor([3.0, 4.0]) - 0.1 * (5 / r.norm()) * r)


def test_a_zero_weight_takes_the_plain_adam_step():
    p = lamb_step([0.0, 0.0], [1.0, -2.0], wd=0.1)
    torch.testing.assert_close(p, torch.tensor([-0.1, 0.1]))


def test_nadam_and_lamb_are_built_with_our_groups():
    model = small_llama()
    nadam = build_optimizer(model, OptimConfig(name="nadam"))
    assert isinstance(nadam, torch.optim.NAdam) and all(g["decoupled_weight_decay"] for g in nadam.param_groups)
    lamb = build_optimizer(model, OptimConfig(name="lamb", wd_exclude="norms_biases"))
    decay = {g["name"]: g["weight_decay"] for g in lamb.param_groups}
    assert decay["norm.no_decay"] == 0.0 and decay["mlp"] == 0.1


def test_the_trust_ratio_on_groups_without_decay_is_a_tagged_knob_of_lamb_only():
    from omegaconf import OmegaConf

    from lit_modules.config.composition import compose_run_config
    from lit_modules.config.errors import ConfigError
    from lit_modules.config.validate import validated
    from lit_modules.optim.build import optimizer_tags

    model = small_llama()
    for knob in (False, True):
        cfg = compose_run_config(["optim=lamb", "optim.wd_exclude=norms_biases_embeddings",
                                  f"optim.lamb_trust_no_decay={str(knob).lower()}"])
        lamb = build_optimizer(model, cfg.optim)
        assert {g["name"]: g["trust_no_decay"] for g in lamb.param_groups}["emb.no_decay"] is knob
        assert optimizer_tags(cfg.optim) == {"optim.lamb_trust_no_decay": str(knob).lower(),
                                             "fidelity.optim.lamb_trust_no_decay": "assumed"}
        # The embedding (no decay here) takes Adam's first step, lr * g / (|g| + eps), unless the ratio is applied.
        emb = model.tok_emb.weight
        before = emb.detach().clone()
        model.zero_grad()
        model(torch.randint(0, 50, (2, 8))).float().logsumexp(-1).mean().backward()
        adam_step = -cfg.optim.lr * emb.grad / (emb.grad.abs() + cfg.optim.eps)
        lamb.step()
        assert torch.allclose(emb.detach() - before, adam_step, atol=1e-7) is not knob
    assert optimizer_tags(OmegaConf.create({"name": "adamw"})) == {}
    with pytest.raises(ConfigError, match="optim.lamb_trust_no_decay applies to optim=lamb only"):
        validated(compose_run_config(["optim=adamw", "optim.lamb_trust_no_decay=true", "regime=steps",
                                      "trainer.max_steps=2"]))
