"""`fold_scalars`: the PC weight built with sigma, the recovery and gamma on the small side is the official
map up to rounding, in value and in every gradient (W, gamma); off by default and tagged when on."""

from __future__ import annotations

import pytest
import torch

from lit_modules.techniques.pc_layer.parametrization import PCParametrization
from lit_modules.techniques.pc_layer.technique import PCLayer


def _value_and_grads(shape, level, recover_norm, learnable_gamma, fold):
    torch.manual_seed(0)
    weight = (torch.randn(*shape, dtype=torch.float64) * 0.05).requires_grad_()
    pc = PCParametrization(shape, level=level, recover_norm=recover_norm, learnable_gamma=learnable_gamma, seed=3,
                           fold_scalars=fold).double()
    pc.refresh(weight, 30)
    if pc.gamma is not None:
        with torch.no_grad():
            pc.gamma.fill_(1.3)
    upstream = torch.randn(*shape, dtype=torch.float64)
    out = pc(weight)
    (out * upstream).sum().backward()
    return out.detach(), weight.grad, None if pc.gamma is None else pc.gamma.grad


@pytest.mark.parametrize("shape", [(48, 16), (16, 48), (24, 24)])
@pytest.mark.parametrize("level", [0, 1, 2, 4])
@pytest.mark.parametrize("recover_norm, learnable_gamma", [(True, True), (False, True), (True, False)])
def test_folded_equals_the_official_order_in_value_and_gradients(shape, level, recover_norm, learnable_gamma):
    official = _value_and_grads(shape, level, recover_norm, learnable_gamma, fold=False)
    folded = _value_and_grads(shape, level, recover_norm, learnable_gamma, fold=True)
    for a, b in zip(official, folded):
        if a is None:
            assert b is None
            continue
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)  # float64: only rounding separates them


def test_folding_is_off_by_default_checked_and_tagged():
    assert PCLayer().fold_scalars is False and "pc.fold_scalars" not in PCLayer().tags()
    assert any("fold_scalars must be true or false" in p for p in PCLayer(fold_scalars="yes").problems())
    tags = PCLayer(fold_scalars=True).tags()
    assert tags["pc.fold_scalars"] == "true" and tags["fidelity.pc_layer.arithmetic"] == "reordered"
