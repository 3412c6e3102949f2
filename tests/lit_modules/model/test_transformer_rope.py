"""RoPE: against an independent complex-number reference, relative positions, buffers and dtype."""

import pytest
import torch

from lit_modules.model.rope import apply_rope, precompute_rope
from tests.helpers.tiny_llama import build


# ----------------------------------------------------------------------- RoPE


def rope_reference(x: torch.Tensor, theta: float) -> torch.Tensor:
    """Independent RoPE: channel pair (j, j+hd/2) as one complex number, rotated by t*w_j."""
    T, hd = x.shape[-2], x.shape[-1]
    half = hd // 2
    x64 = x.double()
    z = torch.complex(x64[..., :half], x64[..., half:])
    w = torch.tensor([theta ** (-2.0 * j / hd) for j in range(half)], dtype=torch.float64)
    t = torch.arange(T, dtype=torch.float64)[:, None]
    z = z * torch.polar(torch.ones(T, half, dtype=torch.float64), t * w)
    return torch.cat([z.real, z.imag], dim=-1)


@pytest.mark.parametrize("theta", [10000.0, 500.0])
def test_rope_matches_complex_reference(theta):
    hd, T = 16, 10
    x = torch.randn(2, 3, T, hd)
    cos, sin = precompute_rope(hd, 32, theta)
    out = apply_rope(x, cos[:T], sin[:T])
    torch.testing.assert_close(out.double(), rope_reference(x, theta), atol=1e-5, rtol=1e-5)


def test_rope_position_zero_is_identity_and_relative():
    hd = 8
    cos, sin = precompute_rope(hd, 16)
    q, k = torch.randn(hd), torch.randn(hd)
    rot = lambda v, t: apply_rope(v.expand(16, hd), cos, sin)[t]  # noqa: E731
    assert torch.allclose(rot(q, 0), q)
    # <R_m q, R_n k> depends only on m - n.
    assert torch.allclose(rot(q, 5) @ rot(k, 2), rot(q, 9) @ rot(k, 6), atol=1e-5)


def test_rope_buffers_are_not_persistent():
    model = build()
    names = set(model.state_dict())
    assert "rope_cos" not in names and "rope_sin" not in names
    assert model.rope_cos.shape == (16, 8)


def test_rope_keeps_bf16_dtype():
    cos, sin = precompute_rope(8, 4)
    x = torch.randn(1, 1, 4, 8).bfloat16()
    assert apply_rope(x, cos, sin).dtype == torch.bfloat16
