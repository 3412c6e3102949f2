"""PC batched by shape group computes what the per-weight PC computed (`reference_pc`, the code before batching),
to float32 rounding: effective weights, their gradients and the power iteration, on every shape group of a
model (tall gate/up with the wide down transposed in, square q/o, wide-only k/v), levels 0-4, with and without
norm recovery; and the forward the model runs is that batched one, traced whole by torch.compile."""

from __future__ import annotations

import copy

import pytest
import torch

from lit_modules.activation_checkpointing import checkpoint_blocks
from lit_modules.model import InitConfig, Llama, LlamaConfig, init_weights
from lit_modules.techniques.pc_layer import PCLayer
from lit_modules.techniques.pc_layer.groups import forward_groups
from lit_modules.techniques.pc_layer.merge import merge_pc
from lit_modules.techniques.pc_layer.parametrization import pc_modules, raw_weight, refresh_all
from tests.lit_modules.techniques.pc_layer import reference_pc

ALL_SEVEN = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
LEVELS = [0, 1, 2, 3, 4]


def _model(level: int = 4, recover_norm: bool = True, seed: int = 0, n_layers: int = 3) -> Llama:
    # d 32, d_ff 96, 4 heads, 2 kv heads: gate/up 96x32 and down 32x96 (one group), q/o 32x32, k/v 16x32 (wide)
    model = Llama(LlamaConfig(vocab_size=61, d_model=32, n_layers=n_layers, n_heads=4, n_kv_heads=2, d_ff=96,
                              max_seq_len=16))
    init_weights(model, InitConfig(), generator=torch.Generator().manual_seed(seed))
    PCLayer(level=level, recover_norm=recover_norm, targets=ALL_SEVEN).transform_model(model)
    refresh_all(model, 10)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for _, _, pc in pc_modules(model):
            pc.gamma.fill_(0.5 + torch.rand(1, generator=g).item())  # gammas away from 1 matter
    return model


def _reference(module, pc, dtype=torch.float32) -> torch.Tensor:
    w = raw_weight(module).to(dtype)
    return reference_pc.effective(w, pc.u.to(dtype), pc.v.to(dtype), pc.level, pc.eps, pc.recover_norm,
                                  pc.gamma.to(dtype))


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).abs().max() / b.double().abs().max()).item()


def test_the_groups_are_the_shapes_up_to_transposition():
    groups = forward_groups(_model())
    shapes = sorted(sorted({tuple(raw_weight(m).shape) for m in g.modules}) for g in groups)
    assert shapes == [[(16, 32)], [(32, 32)], [(32, 96), (96, 32)]]
    assert sorted((len(g.pcs), g.tall) for g in groups) == [(6, 0), (6, 6), (9, 6)]  # 3 layers each


@pytest.mark.parametrize("recover_norm", [True, False])
@pytest.mark.parametrize("level", LEVELS)
def test_effective_weights_equal_the_per_weight_ones_to_float32_rounding(level: int, recover_norm: bool):
    """Every member of every group: within 4e-6 of the per-weight fp32 result (relative to the largest entry),
    and no further from the float64 truth than twice the per-weight fp32 result is (float32 rounding)."""
    model = _model(level, recover_norm)
    for group in forward_groups(model):
        for module, pc, got in zip(group.modules, group.pcs, group.effective()):
            want = _reference(module, pc)
            truth = _reference(module, pc, torch.float64)
            assert got.shape == want.shape and got.dtype == torch.float32
            assert _relative(got, want) < 4e-6
            assert _relative(got, truth) <= 2 * _relative(want, truth) + 2e-7


@pytest.mark.parametrize("recover_norm", [True, False])
@pytest.mark.parametrize("level", [1, 4])
def test_gradients_equal_the_per_weight_ones_to_float32_rounding(level: int, recover_norm: bool):
    """d<C, W_eff> for the raw weights and the gammas, batched against per weight (sigma live, recovery
    stop-gradient: the official placement, `test_parametrization`)."""
    batched, single = _model(level, recover_norm), _model(level, recover_norm)
    g = torch.Generator().manual_seed(7)
    directions = {n: torch.randn(raw_weight(m).shape, generator=g) for n, m, _ in pc_modules(batched)}
    loss = 0.0
    for group in forward_groups(batched):
        names = {id(m): n for n, m, _ in pc_modules(batched)}
        loss = loss + sum((w * directions[names[id(m)]]).sum() for m, w in zip(group.modules, group.effective()))
    loss.backward()
    sum((_reference(m, pc) * directions[n]).sum() for n, m, pc in pc_modules(single)).backward()
    for (name, a, pa), (_, b, pb) in zip(pc_modules(batched), pc_modules(single)):
        assert _relative(raw_weight(a).grad, raw_weight(b).grad) < 2e-5, name
        # d/dgamma = <C, W_eff> / gamma, a sum of signed terms: its rounding scales with the sum of their sizes.
        with torch.no_grad():
            size = (directions[name] * _reference(b, pb)).abs().sum() / pb.gamma
        assert (pa.gamma.grad - pb.gamma.grad).abs().item() < 1e-6 * size.item(), name


def test_streaming_refreshes_follow_the_per_weight_power_iteration():
    """Five refreshes of 10 warm-started iterations, the weights moving in between as training moves them."""
    model = _model()
    ref = {n: (pc.u.clone(), pc.v.clone()) for n, _, pc in pc_modules(model)}
    g = torch.Generator().manual_seed(3)
    for _ in range(5):
        with torch.no_grad():
            for _, module, _ in pc_modules(model):
                raw_weight(module).add_(1e-3 * torch.randn(raw_weight(module).shape, generator=g))
        refresh_all(model, 10, repair=False)
        for name, module, pc in pc_modules(model):
            ref[name] = reference_pc.refresh(raw_weight(module), *ref[name], 10, pc.eps)
            torch.testing.assert_close(pc.u, ref[name][0], rtol=0, atol=2e-6, msg=name)
            torch.testing.assert_close(pc.v, ref[name][1], rtol=0, atol=2e-6, msg=name)


def test_float64_buffers_refresh_in_float64_to_float64_rounding():
    model = _model().double()
    for _, _, pc in pc_modules(model):
        assert pc.working_dtype == torch.float64
    before = {n: (pc.u.clone(), pc.v.clone()) for n, _, pc in pc_modules(model)}
    refresh_all(model, 10)
    for name, module, pc in pc_modules(model):
        u, v = reference_pc.refresh(raw_weight(module), *before[name], 10, pc.eps)
        torch.testing.assert_close(pc.u, u, rtol=0, atol=1e-13)
        torch.testing.assert_close(pc.v, v, rtol=0, atol=1e-13)


def test_the_model_forward_uses_the_batched_weights_and_lets_them_go():
    model = _model()
    seen = []
    up = model.layers[1].mlp.up_proj
    pc = up.parametrizations.weight[0]
    up.register_forward_pre_hook(lambda m, args: seen.append(m.weight is pc.stacked_weight))
    x = torch.randint(0, 61, (2, 16), generator=torch.Generator().manual_seed(0))
    logits = model(x)
    assert seen == [True] and logits.requires_grad
    assert all(p.stacked_weight is None for _, _, p in pc_modules(model))  # each freed after its own backward
    alone = copy.deepcopy(model)
    alone.__dict__["_pc_shape_batches"].groups = []  # no group: every weight computed alone, per weight
    alone._forward_pre_hooks.clear()
    with torch.no_grad():
        assert _relative(logits, alone(x)) < 4e-6


def test_checkpointed_blocks_keep_the_batched_weights_while_they_are_current():
    model = _model()
    checkpoint_blocks(model)
    up = model.layers[1].mlp.up_proj
    pc = up.parametrizations.weight[0]
    x = torch.randint(0, 61, (2, 16), generator=torch.Generator().manual_seed(0))
    model(x)
    assert up.weight is pc.stacked_weight  # kept for the backward's recomputation
    with torch.no_grad():
        raw_weight(up).mul_(1.5)  # an optimizer step, a rescale: the kept weight is stale now
    fresh = up.weight
    assert fresh is not pc.stacked_weight and not torch.equal(fresh, pc.stacked_weight)
    torch.testing.assert_close(fresh, _reference(up, pc), rtol=0, atol=4e-6 * fresh.abs().max().item())
    refresh_all(model, 1)
    assert all(p.stacked_weight is None for _, _, p in pc_modules(model))  # a refresh lets them go
    with torch.no_grad():
        model(x)
    assert all(p.stacked_weight is None for _, _, p in pc_modules(model))  # no backward to come: let go at once


def test_merged_weights_are_the_ones_the_forward_uses():
    model = _model()
    merged = merge_pc(copy.deepcopy(model), refresh_iters=0)
    for group in forward_groups(model):
        names = {id(m): n for n, m, _ in pc_modules(model)}
        for module, weight in zip(group.modules, group.effective()):
            assert torch.equal(merged.get_submodule(names[id(module)]).weight, weight.detach())


def test_activation_checkpointing_gives_the_same_gradients():
    """A checkpointed block recomputes in the backward, after the forward let the batched weights go: its weights
    are then computed alone (a stack of one), which differs from the batched ones only by rounding."""
    plain, checkpointed = _model(seed=4), _model(seed=4)
    assert checkpoint_blocks(checkpointed) == 3
    x = torch.randint(0, 61, (2, 16), generator=torch.Generator().manual_seed(1))
    for model in (plain, checkpointed):
        model(x).square().mean().backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), checkpointed.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-7, msg=name)


def test_torch_compile_traces_the_batched_forward_whole():
    model = _model(n_layers=2)
    reference = copy.deepcopy(model)
    x = torch.randint(0, 61, (2, 16), generator=torch.Generator().manual_seed(2))
    compiled = torch.compile(model, fullgraph=True, backend="eager")  # a graph break would raise
    compiled(x).square().mean().backward()
    reference(x).square().mean().backward()
    for (name, a), (_, b) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-8, msg=name)
