"""Adam-mini on known cases: one second moment per head (q/k), per row (embedding, head, v/o, MLP, LoRA
factors) or per tensor (norms, gate), and the optimizer our groups build."""

from __future__ import annotations

import pytest
import torch

from lit_modules.config.schema import OptimConfig
from lit_modules.optim.adam_mini import AdamMini, block_rows
from lit_modules.optim.build import build_optimizer
from tests.helpers.models import small_llama


def one_step(family: str, p0: torch.Tensor, grad: torch.Tensor, lr=0.1, wd=0.0, head_dim=2):
    p = torch.nn.Parameter(p0.clone())
    opt = AdamMini([{"params": [p], "family": family, "weight_decay": wd}], lr=lr, betas=(0.9, 0.99), eps=0.0,
                   head_dim=head_dim)
    p.grad = grad.clone()
    opt.step()
    return p.detach(), opt.state[p]


GRAD = torch.tensor([[1.0, -2.0, 2.0], [0.0, 1.0, -1.0], [3.0, 0.0, 0.0], [0.0, 0.0, 4.0]])
P0 = torch.arange(12.0).reshape(4, 3) / 10


def test_first_step_divides_by_the_rms_of_each_head_for_queries_and_keys():
    # m_hat = g, v_hat_b = mean_b(g^2): the first step is lr * g / rms over the head's head_dim rows.
    p, state = one_step("qk", P0, GRAD)
    rms = torch.stack([GRAD[:2].pow(2).mean().sqrt(), GRAD[2:].pow(2).mean().sqrt()])
    expected = P0 - 0.1 * GRAD / rms.repeat_interleave(2)[:, None]
    torch.testing.assert_close(p, expected)
    assert state["vmean"].shape == (2, 1)


@pytest.mark.parametrize("family", ["emb", "head", "vo", "mlp", "lora_qk"])
def test_rows_share_one_second_moment_for_tokens_and_neurons(family):
    p, state = one_step(family, P0, GRAD)
    expected = P0 - 0.1 * GRAD / GRAD.pow(2).mean(dim=1, keepdim=True).sqrt()
    torch.testing.assert_close(p, expected)
    assert state["vmean"].shape == (4, 1)


@pytest.mark.parametrize("family", ["norm", "attn_gate", "other"])
def test_other_tensors_share_one_second_moment(family):
    p, state = one_step(family, P0, GRAD, wd=0.5)
    expected = P0 * (1 - 0.1 * 0.5) - 0.1 * GRAD / GRAD.pow(2).mean().sqrt()  # decoupled decay first
    torch.testing.assert_close(p, expected)
    assert state["vmean"].shape == (1, 1)


def test_second_step_follows_the_moment_recursions():
    p = torch.nn.Parameter(P0.clone())
    opt = AdamMini([{"params": [p], "family": "mlp", "weight_decay": 0.0}], lr=0.1, betas=(0.9, 0.99), eps=0.0,
                   head_dim=2)
    g1, g2 = GRAD, GRAD.flip(0)
    for g in (g1, g2):
        p.grad = g.clone()
        opt.step()
    m = 0.9 * 0.1 * g1 + 0.1 * g2
    v = 0.99 * 0.01 * g1.pow(2).mean(1, keepdim=True) + 0.01 * g2.pow(2).mean(1, keepdim=True)
    first = P0 - 0.1 * g1 / g1.pow(2).mean(1, keepdim=True).sqrt()
    expected = first - 0.1 * (m / (1 - 0.9**2)) / (v / (1 - 0.99**2)).sqrt()
    torch.testing.assert_close(p.detach(), expected)


def test_the_built_optimizer_partitions_a_model_by_family():
    model = small_llama()
    opt = build_optimizer(model, OptimConfig(name="adam_mini"))
    assert isinstance(opt, AdamMini) and opt.head_dim == model.cfg.head_dim == 8
    model(torch.zeros(1, 4, dtype=torch.long)).sum().backward()
    opt.step()
    shapes = {n: tuple(opt.state[p]["vmean"].shape) for n, p in model.named_parameters()}
    assert shapes["layers.0.attn.q_proj.weight"] == (4, 1)  # n_heads
    assert shapes["layers.0.attn.k_proj.weight"] == (2, 1)  # n_kv_heads
    assert shapes["layers.0.attn.v_proj.weight"] == (16, 1)  # kv rows
    assert shapes["tok_emb.weight"] == (50, 1) and shapes["lm_head.weight"] == (50, 1)
    assert shapes["layers.0.mlp.down_proj.weight"] == (32, 1) and shapes["final_norm.weight"] == (1, 1)
    assert block_rows("qk", 8) == 8 and block_rows("norm", 8) == 0
