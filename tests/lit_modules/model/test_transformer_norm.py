"""RMSNorm: eps on tiny activations, fp32 statistics under bf16, and its single `weight` of ones."""

import torch

from lit_modules.model.norm import RMSNorm


# -------------------------------------------------------------------- RMSNorm


def rms(t: torch.Tensor) -> torch.Tensor:
    return t.float().pow(2).mean(-1).sqrt()


def test_rmsnorm_eps_saturates_tiny_activations():
    x = torch.randn(4, 256) * 1e-4
    big_eps = RMSNorm(256, eps=1e-5)(x)
    tiny_eps = RMSNorm(256, eps=1e-12)(x)
    assert rms(big_eps).max() < 0.1  # eps dominates the 1e-8 mean square
    torch.testing.assert_close(rms(tiny_eps), torch.ones(4), atol=1e-4, rtol=0)


def test_rmsnorm_does_fp32_math_under_bf16():
    x = (torch.randn(4, 256) * 1e-4).bfloat16()
    out = RMSNorm(256, eps=1e-12)(x)
    assert out.dtype == torch.bfloat16
    # Exactly one rounding to bf16, at the end: the statistic is computed in fp32.
    x32 = x.float()
    expected = (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-12)).bfloat16()
    assert torch.equal(out, expected)
    torch.testing.assert_close(rms(out), torch.ones(4), atol=1e-2, rtol=0)
    assert rms(RMSNorm(256, eps=1e-5)(x)).max() < 0.1  # eps still honoured under bf16


def test_rmsnorm_weight_is_named_weight_and_ones():
    norm = RMSNorm(8)
    assert [n for n, _ in norm.named_parameters()] == ["weight"]
    assert torch.equal(norm.weight, torch.ones(8))
