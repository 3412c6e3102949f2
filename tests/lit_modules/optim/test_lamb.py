"""LAMB on known cases (trust ratio ||p|| / ||r||, decay inside r) and NAdam as built from the config."""

from __future__ import annotations

import math

import torch

from lit_modules.config.schema import OptimConfig
from lit_modules.optim.build import build_optimizer
from lit_modules.optim.lamb import Lamb
from tests.helpers.models import small_llama


def lamb_step(p0, grad, wd=0.0, lr=0.1):
    p = torch.nn.Parameter(torch.tensor(p0))
    opt = Lamb([{"params": [p], "weight_decay": wd}], lr=lr, betas=(0.9, 0.999), eps=0.0)
    p.grad = torch.tensor(grad)
    opt.step()
    return p.detach()


def test_first_step_is_the_sign_scaled_by_the_trust_ratio():
    # m_hat = g, v_hat = g^2: r = sign(g) = [1, -1]; ||p|| = 5, ||r|| = sqrt(2).
    p = lamb_step([3.0, 4.0], [1.0, -2.0])
    trust = 5 / math.sqrt(2)
    torch.testing.assert_close(p, torch.tensor([3.0 - 0.1 * trust, 4.0 + 0.1 * trust]))


def test_decay_is_part_of_the_normalized_update():
    p = lamb_step([3.0, 4.0], [1.0, -2.0], wd=0.5)
    r = torch.tensor([1.0 + 1.5, -1.0 + 2.0])
    torch.testing.assert_close(p, torch.tensor([3.0, 4.0]) - 0.1 * (5 / r.norm()) * r)


def test_a_zero_weight_takes_the_plain_adam_step():
    p = lamb_step([0.0, 0.0], [1.0, -2.0])
    torch.testing.assert_close(p, torch.tensor([-0.1, 0.1]))


def test_nadam_and_lamb_are_built_with_our_groups():
    model = small_llama()
    nadam = build_optimizer(model, OptimConfig(name="nadam"))
    assert isinstance(nadam, torch.optim.NAdam) and all(g["decoupled_weight_decay"] for g in nadam.param_groups)
    lamb = build_optimizer(model, OptimConfig(name="lamb", wd_exclude="norms_biases"))
    decay = {g["name"]: g["weight_decay"] for g in lamb.param_groups}
    assert decay["norm.no_decay"] == 0.0 and decay["mlp"] == 0.1
