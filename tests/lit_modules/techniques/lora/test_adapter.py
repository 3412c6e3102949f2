"""LoRA / rsLoRA / PiSSA adapters: the function at step 0, the scalings, and merging into plain weights."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn.utils import parametrize

from lit_modules.optim.build import build_optimizer
from lit_modules.optim.param_groups import build_group_specs
from lit_modules.config.schema import OptimConfig
from lit_modules.techniques.lora import Lora
from lit_modules.techniques.lora.adapter import adapters, merge
from tests.helpers.models import small_llama, token_batch


def adapted(variant: str, rank: int = 4, alpha: float = 8.0, **kw):
    model = small_llama()
    x = token_batch(model)
    with torch.no_grad():
        before = model(x)
    lora = Lora(variant=variant, rank=rank, alpha=alpha, **kw)
    return lora.transform_loaded_model(model), x, before


@pytest.mark.parametrize("variant", ["lora", "rslora"])
def test_lora_and_rslora_leave_the_function_unchanged_at_step_0(variant):
    model, x, before = adapted(variant)
    with torch.no_grad():
        assert torch.equal(model(x), before)  # B = 0: W + scaling * 0 @ A is W exactly
    found = adapters(model)
    assert len(found) == 2 * 7  # every projection of both layers
    assert all(torch.count_nonzero(a.lora_B) == 0 and torch.count_nonzero(a.lora_A) > 0 for _, a in found)


def test_pissa_keeps_the_function_and_puts_the_principal_part_in_the_adapter():
    model, x, before = adapted("pissa", rank=4, alpha=4.0)
    with torch.no_grad():
        torch.testing.assert_close(model(x), before, rtol=0, atol=2e-6)
    reference = small_llama()  # the same seeded weights, not adapted
    path, adapter = next((p, a) for p, a in adapters(model) if p.endswith("layers.0.attn.q_proj"))
    w = reference.layers[0].attn.q_proj.weight.detach().double()
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    principal = (u[:, :4] * s[:4]) @ vh[:4]
    torch.testing.assert_close(adapter.delta().double(), principal, rtol=0, atol=1e-6)
    residual = model.layers[0].attn.q_proj.parametrizations.weight.original
    torch.testing.assert_close(residual.double(), w - principal, rtol=0, atol=1e-6)
    assert not residual.requires_grad


@pytest.mark.parametrize("variant,expected", [("lora", 8.0 / 4), ("rslora", 8.0 / 2), ("pissa", 8.0 / 4)])
def test_scaling_is_alpha_over_r_or_over_sqrt_r(variant, expected):
    model, _, _ = adapted(variant, rank=4, alpha=8.0)
    assert {a.scaling for _, a in adapters(model)} == {expected}


@pytest.mark.parametrize("variant", ["lora", "rslora", "pissa"])
def test_merged_weights_give_the_unmerged_logits(variant):
    model, x, _ = adapted(variant)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():  # trained-looking adapters: both factors non-zero
        for _, a in adapters(model):
            a.lora_A.add_(0.1 * torch.randn(a.lora_A.shape, generator=g))
            a.lora_B.add_(0.1 * torch.randn(a.lora_B.shape, generator=g))
        unmerged = model(x)
        merged_model = merge(copy.deepcopy(model))
        merged = merged_model(x)
    assert not (unmerged - small_llama()(x)).abs().max() < 1e-3  # the adapters do change the function
    torch.testing.assert_close(merged, unmerged, rtol=0, atol=1e-6)
    assert not any(parametrize.is_parametrized(m) for m in merged_model.modules())
    assert set(merged_model.state_dict()) == set(small_llama().state_dict())


def test_only_the_adapters_train_and_they_are_families_of_their_own():
    model, _, _ = adapted("lora", targets=["q_proj", "v_proj", "gate_proj"])
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all(n.endswith((".lora_A", ".lora_B")) for n in trainable)
    specs = build_group_specs(model, "norms_biases")
    assert [s.family for s in specs] == ["lora_qk", "lora_vo", "lora_mlp"]
    assert all(s.decayed for s in specs) and sum(len(s.params) for s in specs) == 2 * 3 * 2
    muon = build_optimizer(model, OptimConfig(name="muon"))
    assert [type(o) for o in muon.optimizers] == [torch.optim.AdamW]  # adapters stay with AdamW under muon
    assert sum(len(g["params"]) for g in muon.param_groups) == 2 * 3 * 2


def test_attention_gate_is_a_target():
    model = small_llama(attn_gate="headwise")
    Lora(targets=["attn_gate"], rank=2).transform_loaded_model(model)
    assert [p for p, _ in adapters(model)] == ["layers.0.attn.gate_proj", "layers.1.attn.gate_proj"]
    assert {s.family for s in build_group_specs(model, "none")} == {"lora_attn_gate"}


def test_adapter_draws_depend_only_on_the_seed():
    a, _, _ = adapted("lora", seed=5)
    b, _, _ = adapted("lora", seed=5)
    c, _, _ = adapted("lora", seed=6)
    first = lambda m: adapters(m)[0][1].lora_A  # noqa: E731
    assert torch.equal(first(a), first(b)) and not torch.equal(first(a), first(c))
