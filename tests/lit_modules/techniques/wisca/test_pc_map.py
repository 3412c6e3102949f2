"""The PC map under a rescale of its raw weight: homogeneous with norm recovery; which scales commute."""

import pytest
import torch
from torch.nn.utils import parametrize

from lit_modules.techniques.pc_layer.parametrization import PCParametrization, attach_pc
from lit_modules.techniques.scalable_weight import scalable_weight, scaling_problem
from tests.helpers.wisca_pc import assert_close_up_to_rounding


# ------------------------------------------------------------------ the PC map and the power iteration


def _pc(level: int, recover_norm: bool = True, learnable_gamma: bool = True, shape=(24, 16)):
    pc = PCParametrization(shape, level=level, recover_norm=recover_norm, learnable_gamma=learnable_gamma)
    if pc.gamma is not None:
        with torch.no_grad():
            pc.gamma.fill_(1.7)  # a trained-looking gamma, not the init 1
    return pc


def _weight(shape=(24, 16), seed: int = 0) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 0.3


@pytest.mark.parametrize("learnable_gamma", [True, False])
@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("iters", [1, 30])
def test_pc_map_with_norm_recovery_is_positively_homogeneous(level, learnable_gamma, iters):
    """The math, in float64 with eps = 0: f(cW) = c f(W) for every c > 0 and ANY u, v (one power iteration,
    far from converged, or thirty): sigma(cW) = c sigma(W), p(cW / sigma(cW)) = p(W / sigma(W)), and the
    recovered sg(sigma) carries c."""
    pc = PCParametrization((24, 16), level=level, learnable_gamma=learnable_gamma, eps=0.0).double()
    w = _weight().double()
    if pc.gamma is not None:
        with torch.no_grad():
            pc.gamma.fill_(1.7)
    pc.refresh(w, iters=iters)
    with torch.no_grad():
        for c in (0.05, 0.37, 2.9, 40.0):
            assert_close_up_to_rounding(pc(c * w), c * pc(w), tol=1e-12)
    assert pc.scaling_problem("tensor") is None


@pytest.mark.parametrize("level", [0, 2, 4])
def test_pc_map_is_homogeneous_to_fp32_rounding_as_trained(level):
    """fp32 and the real eps (1e-7): sigma(cW) = c sigma(W) + (1 - c) eps, negligible against a refreshed
    sigma (~ the top singular value). A periodic transition always meets refreshed u, v: the refresh runs at
    train start and after every optimizer step."""
    pc, w = _pc(level), _weight()
    pc.refresh(w, iters=30)
    with torch.no_grad():
        for c in (0.05, 0.37, 2.9, 40.0):
            assert_close_up_to_rounding(pc(c * w), c * pc(w))


def test_homogeneity_holds_for_the_stop_gradient_sigma_too():
    """The surrogate gradient through sg(sigma) maps like a true one: grad at cW = grad at W (degree 0)."""
    pc, w = _pc(4), _weight()
    pc.refresh(w, iters=30)
    upstream = torch.randn(24, 16, generator=torch.Generator().manual_seed(5))
    grads = []
    for c in (1.0, 0.4):
        raw = (c * w).requires_grad_(True)
        (pc(raw) * upstream).sum().backward()
        grads.append(raw.grad)
    # L'(X) = L(X / c) seen from the other side: the raw gradient at cW is the gradient at W, i.e. the
    # rescaled weight's gradient is g / factor with factor = c, which is what opt_state=rescale assumes.
    assert_close_up_to_rounding(grads[1], grads[0])


def test_power_iteration_finds_the_same_directions_on_a_scaled_weight():
    """u, v are directions: refreshing them on cW gives the same buffers, so the next forward after the
    usual per-step refresh still computes exactly c * W_eff."""
    w = _weight()
    plain, scaled = _pc(4), _pc(4)
    plain.refresh(w, iters=10)
    scaled.refresh(0.3 * w, iters=10)
    torch.testing.assert_close(scaled.u, plain.u, rtol=0, atol=1e-6)
    torch.testing.assert_close(scaled.v, plain.v, rtol=0, atol=1e-6)
    with torch.no_grad():
        assert_close_up_to_rounding(scaled(0.3 * w), 0.3 * plain(w))


@pytest.mark.parametrize("level", [0, 4])
def test_without_norm_recovery_the_scale_is_lost(level):
    """recover_norm=false: f(cW) = f(W), so scaling the raw weight cannot scale W_eff (hence refused)."""
    pc, w = _pc(level, recover_norm=False), _weight()
    pc.refresh(w, iters=30)
    with torch.no_grad():
        assert_close_up_to_rounding(pc(0.3 * w), pc(w))
    assert "recover_norm=false" in pc.scaling_problem("tensor")


def test_a_per_row_scale_commutes_with_level_0_only():
    rows = torch.linspace(0.2, 3.0, 24)[:, None]
    w = _weight()
    identity, level4 = _pc(0), _pc(4)
    for pc in (identity, level4):
        pc.refresh(w, iters=30)
    with torch.no_grad():
        assert_close_up_to_rounding(identity(rows * w), rows * identity(w))
        assert (level4(rows * w) - rows * level4(w)).abs().max() > 1e-2 * level4(w).abs().max()
    assert identity.scaling_problem("rows") is None and identity.scaling_problem("columns") is None
    assert "does not commute" in level4.scaling_problem("columns")
    assert level4.scaling_problem("tensor") is None


def test_a_parametrization_without_a_scaling_rule_is_never_scaled_through():
    class Doubled(torch.nn.Module):
        def forward(self, weight):
            return 2 * weight

    plain, wrapped, pc = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    parametrize.register_parametrization(wrapped, "weight", Doubled())
    attach_pc(pc, "pc", level=4)
    assert scalable_weight(plain, "columns") is plain.weight and scaling_problem(plain, "rows") is None
    assert "declares no scaling rule" in scaling_problem(wrapped, "tensor")
    with pytest.raises(ValueError, match="Cannot rescale this weight exactly"):
        scalable_weight(wrapped, "tensor")
    assert scalable_weight(pc, "tensor") is pc.parametrizations.weight.original
    assert "per-column" in scaling_problem(pc, "columns")
