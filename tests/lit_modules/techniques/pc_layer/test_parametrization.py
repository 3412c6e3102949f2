"""PC parametrization: forward formula, gradient placement, power iteration, buffers and checkpoints."""

import copy

import pytest
import torch
from torch import nn

from lit_modules.techniques.pc_layer.parametrization import (
    PCParametrization,
    attach_pc,
    pc_modules,
    pc_of,
    raw_weight,
    refresh_all,
)
from lit_modules.techniques.pc_layer.polynomials import coefficients, odd_polynomial
from tests.lit_modules.techniques.pc_layer import reference_pc

torch.set_default_dtype(torch.float32)


def _matrix_with_spectrum(s, rows, cols, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, len(s), generator=g, dtype=dtype))
    v, _ = torch.linalg.qr(torch.randn(cols, len(s), generator=g, dtype=dtype))
    return u @ torch.diag(s.to(dtype)) @ v.T


def reference_effective(
    w, u, v, level, eps, gamma, *, detach_sigma=False, detach_recovery=True, recover=True
):
    """W_eff written out with explicit detach placement (the official: sigma live, recovery detached)."""
    sigma = u @ w @ v + eps
    wn = w / (sigma.detach() if detach_sigma else sigma)
    gram = wn.T @ wn
    p = sum(c * wn @ torch.linalg.matrix_power(gram, j) for j, c in enumerate(coefficients(level)))
    if recover:
        p = p * (sigma.detach() if detach_recovery else sigma)
    return p * gamma if gamma is not None else p


def _pc(shape, level=4, **kw):
    return PCParametrization(shape, level=level, **kw).double()


def test_forward_is_the_official_formula():
    torch.manual_seed(0)
    w = torch.randn(12, 7, dtype=torch.float64)
    pc = _pc((12, 7), level=3)
    pc.refresh(w, 30)
    with torch.no_grad():
        pc.gamma.fill_(0.7)
    got = pc(w)
    want = reference_effective(w, pc.u.double(), pc.v.double(), 3, pc.eps, pc.gamma)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("shape", [(16, 6), (6, 16), (9, 9)])
def test_singular_values_are_sigma_times_p(shape):
    s = torch.linspace(2.0, 0.1, min(shape), dtype=torch.float64)
    w = _matrix_with_spectrum(s, *shape)
    pc = _pc(shape, level=4, learnable_gamma=False)
    pc.refresh(w, 200)  # converged: sigma = 2 (+ eps)
    got = torch.linalg.svdvals(pc(w))
    want = torch.sort(2.0 * odd_polynomial(s / 2.0, 4).abs(), descending=True).values
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9)


def test_without_recovery_the_spectrum_is_p_of_the_normalized_one():
    s = torch.linspace(3.0, 0.3, 8, dtype=torch.float64)
    w = _matrix_with_spectrum(s, 20, 8)
    pc = _pc((20, 8), level=2, recover_norm=False, learnable_gamma=False)
    pc.refresh(w, 200)
    got = torch.linalg.svdvals(pc(w))
    want = torch.sort(odd_polynomial(s / 3.0, 2), descending=True).values  # sigma_1 -> p(1) = 1
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-9)
    assert 1.0 in [round(x, 6) for x in got.tolist()]


def _grads(fn, w, c):
    w = w.clone().requires_grad_(True)
    (fn(w) * c).sum().backward()
    return w.grad


@pytest.mark.parametrize("level", [0, 2, 4])
def test_gradient_flows_through_sigma_but_not_through_recovery(level):
    torch.manual_seed(1)
    w0 = torch.randn(10, 6, dtype=torch.float64)
    c = torch.randn(10, 6, dtype=torch.float64)
    pc = _pc((10, 6), level=level)
    pc.refresh(w0, 50)
    with torch.no_grad():
        pc.gamma.fill_(1.3)
    u, v, gamma = pc.u.double(), pc.v.double(), pc.gamma.detach()
    got = _grads(pc, w0, c)
    official = _grads(lambda w: reference_effective(w, u, v, level, pc.eps, gamma), w0, c)
    sigma_detached = _grads(
        lambda w: reference_effective(w, u, v, level, pc.eps, gamma, detach_sigma=True), w0, c
    )
    recovery_live = _grads(
        lambda w: reference_effective(w, u, v, level, pc.eps, gamma, detach_recovery=False), w0, c
    )
    torch.testing.assert_close(got, official, rtol=1e-10, atol=1e-12)
    assert (got - sigma_detached).abs().max() > 1e-3  # the normalizer's gradient is there
    assert (got - recovery_live).abs().max() > 1e-3  # the recovery factor's gradient is not


def test_level0_gradient_matches_the_analytic_projection():
    # W_eff = sg(sigma) W / sigma with sigma = u^T W v + eps:  dL/dW = C - (<C, W> / sigma) u v^T.
    torch.manual_seed(2)
    w = torch.randn(8, 5, dtype=torch.float64)
    c = torch.randn(8, 5, dtype=torch.float64)
    pc = _pc((8, 5), level=0, learnable_gamma=False)
    pc.refresh(w, 50)
    u, v = pc.u.double(), pc.v.double()
    sigma = (u @ w @ v + pc.eps).item()
    analytic = c - ((c * w).sum() / sigma) * torch.outer(u, v)
    torch.testing.assert_close(_grads(pc, w, c), analytic, rtol=1e-10, atol=1e-12)


def test_gamma_gradient():
    torch.manual_seed(3)
    w = torch.randn(6, 6, dtype=torch.float64)
    c = torch.randn(6, 6, dtype=torch.float64)
    pc = _pc((6, 6), level=1)
    pc.refresh(w, 50)
    (pc(w) * c).sum().backward()
    with torch.no_grad():
        expected = (pc.preconditioned(w) * c).sum()
    assert pc.gamma.grad.item() == pytest.approx(expected.item(), rel=1e-10)


def test_power_iteration_reaches_the_top_singular_value_within_one_percent():
    g = torch.Generator().manual_seed(4)
    w = torch.randn(384, 128, generator=g) * 0.02  # like an initialized up_proj of the small model
    pc = PCParametrization((384, 128))
    pc.refresh(w, 10)  # the release's once-before-training refresh: 10 iterations from random
    errors = []
    for _ in range(20):  # streaming: 10 warm-started iterations after each "optimizer step"
        w = w + 2e-4 * torch.randn(w.shape, generator=g)  # a small training update
        pc.refresh(w, 10)
        errors.append(abs(pc.sigma(w).item() / torch.linalg.svdvals(w.double())[0].item() - 1))
    assert max(errors[4:]) < 0.01  # within 1 % after a handful of steps, and it stays there
    assert errors[-1] < 0.01


def test_power_iteration_converges_on_a_known_spectrum():
    s = torch.tensor([3.0, 2.0, 1.0, 0.5], dtype=torch.float64)
    w = _matrix_with_spectrum(s, 30, 4).float()
    pc = PCParametrization((30, 4))
    pc.refresh(w, 10)
    # Rayleigh-quotient error shrinks like (2/3)^(4 x 10) ~ 1e-7 (fp32 limits the rest).
    assert pc.sigma(w).item() == pytest.approx(3.0, rel=1e-4)


@pytest.mark.parametrize("corrupt", ["nan", "zero", "shape"])
def test_invalid_buffers_are_reinitialized(corrupt):
    w = _matrix_with_spectrum(torch.tensor([2.0, 1.0, 0.5]), 12, 3).float()
    pc = PCParametrization((12, 3))
    pc.refresh(w, 20)
    if corrupt == "nan":
        pc.u[0] = float("nan")
    elif corrupt == "zero":
        pc.v.zero_()
    else:
        pc.u = torch.ones(5)
    assert not pc.state_is_valid(w)
    pc.refresh(w, 30)
    assert pc.state_is_valid(w)
    assert pc.u.shape == (12,) and pc.u.dtype == torch.float32
    assert pc.sigma(w).item() == pytest.approx(2.0, rel=1e-4)


def test_uv_init_is_deterministic_and_leaves_the_global_rng_alone():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    a = PCParametrization((7, 5), seed=11)
    b = PCParametrization((7, 5), seed=11)
    assert torch.equal(torch.get_rng_state(), before)
    assert torch.equal(a.u, b.u) and torch.equal(a.v, b.v)
    assert a.u.norm().item() == pytest.approx(1.0, abs=1e-6)


class _TwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Module()
        self.mlp.up_proj = nn.Linear(6, 14, bias=False)
        self.mlp.down_proj = nn.Linear(14, 6, bias=False)

    def forward(self, x):
        return self.mlp.down_proj(torch.relu(self.mlp.up_proj(x)))


def _pc_model(seed):
    torch.manual_seed(seed)
    model = _TwoLinears()
    for name in ("mlp.up_proj", "mlp.down_proj"):
        attach_pc(model.get_submodule(name), name, level=4)
    return model


def test_checkpoint_round_trip_keeps_u_v_and_gamma(tmp_path):
    model = _pc_model(0)
    refresh_all(model, 25)
    with torch.no_grad():
        pc_of(model.mlp.up_proj).gamma.fill_(0.8)
    keys = set(model.state_dict())
    assert {
        "mlp.up_proj.parametrizations.weight.original",
        "mlp.up_proj.parametrizations.weight.0.u",
        "mlp.up_proj.parametrizations.weight.0.v",
        "mlp.up_proj.parametrizations.weight.0.gamma",
    } <= keys
    torch.save(model.state_dict(), tmp_path / "sd.pt")
    fresh = _pc_model(1)  # different weights and a different torch seed
    fresh.load_state_dict(torch.load(tmp_path / "sd.pt", weights_only=True))
    for name in ("up_proj", "down_proj"):
        a, b = pc_of(getattr(model.mlp, name)), pc_of(getattr(fresh.mlp, name))
        assert torch.equal(a.u, b.u) and torch.equal(a.v, b.v) and torch.equal(a.gamma, b.gamma)
    assert pc_of(fresh.mlp.up_proj).gamma.item() == pytest.approx(0.8)
    x = torch.randn(3, 6)
    torch.testing.assert_close(model(x), fresh(x), rtol=0, atol=0)


def test_optimizer_sees_the_raw_weight_and_gamma():
    model = _pc_model(0)
    names = {n: p for n, p in model.named_parameters()}
    assert set(names) == {
        "mlp.up_proj.parametrizations.weight.original",
        "mlp.up_proj.parametrizations.weight.0.gamma",
        "mlp.down_proj.parametrizations.weight.original",
        "mlp.down_proj.parametrizations.weight.0.gamma",
    }
    assert raw_weight(model.mlp.up_proj) is names["mlp.up_proj.parametrizations.weight.original"]
    assert raw_weight(model.mlp.up_proj).ndim == 2 and names[
        "mlp.up_proj.parametrizations.weight.0.gamma"
    ].shape == (1,)


def test_attaching_twice_is_refused():
    model = _pc_model(0)
    with pytest.raises(ValueError, match="already"):
        attach_pc(model.mlp.up_proj, "mlp.up_proj")


# --- refreshing all layers together is refreshing each one -----------------------------------------------------


def _llama_with_pc(seed: int = 0, n_layers: int = 2):
    from lit_modules.model import InitConfig, Llama, LlamaConfig, init_weights
    from lit_modules.techniques.pc_layer import PCLayer

    model = Llama(LlamaConfig(vocab_size=61, d_model=32, n_layers=n_layers, n_heads=4, n_kv_heads=2, d_ff=96,
                              max_seq_len=16))
    init_weights(model, InitConfig(), generator=torch.Generator().manual_seed(seed))
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    return PCLayer(targets=targets).transform_model(model)


def _buffers(model) -> list[torch.Tensor]:
    return [t for _, _, pc in pc_modules(model) for t in (pc.u, pc.v)]


@pytest.mark.parametrize("only_invalid", [False, True])
def test_refresh_all_is_refreshing_each_layer_to_rounding(only_invalid: bool):
    """Batched by shape (tall, wide and square groups, wide weights transposed into the tall group) the refresh
    gives each layer's per-layer power iteration (`reference_pc.refresh`) to float32 rounding, repairs included."""
    together = _llama_with_pc()
    found = pc_modules(together)
    # Damage three layers as a bad checkpoint or meta materialization would: NaN, zero, wrong size.
    found[1][2].u[3] = float("nan")
    found[4][2].v.zero_()
    found[6][2].u = torch.ones(5)
    one_by_one = copy.deepcopy(together)
    assert refresh_all(together, 10, only_invalid=only_invalid) == (3 if only_invalid else len(found))
    for _, module, pc in pc_modules(one_by_one):
        if not pc.state_is_valid(raw_weight(module)):
            pc._random_init(*raw_weight(module).shape)
        elif only_invalid:
            continue
        u, v = reference_pc.refresh(raw_weight(module), pc.u, pc.v, 10, pc.eps)
        pc.u.copy_(u)
        pc.v.copy_(v)
    for a, b in zip(_buffers(together), _buffers(one_by_one)):
        assert a.dtype == b.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)  # unit vectors: a few float32 ulps


def test_refresh_all_makes_the_same_torch_calls_at_any_depth():
    """Each operation costs microseconds of dispatch (a kernel launch on a GPU), which is what a small model's
    PC step pays for: batched by shape, the refresh launches as much at 4 layers as at 2, and never reads a
    value on the host (layer by layer it made 8 operations per layer and iteration)."""
    from torch.profiler import profile

    from lit_modules.bench.pc_launches import launch_counts

    counts = {}
    for layers in (2, 4):
        model = _llama_with_pc(n_layers=layers)
        with profile() as prof:
            refresh_all(model, 10, repair=False)
        counts[layers] = launch_counts(prof.events())[0]["launch"]
    assert counts[2] == counts[4]
    # 3 groups (gate/up/down, q/o, k/v) x 10 iterations x 2 half-steps x (bmm, norm, add, div) + a few per group
    assert 240 <= sum(counts[4].values()) < 280 < 7 * 4 * 10 * 2 * 4
    assert not {"aten::item", "aten::_local_scalar_dense"} & set(counts[4])
