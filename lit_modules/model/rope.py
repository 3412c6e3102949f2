"""Rotary position embedding (RoPE), rotate-half layout.

Layout contract (other components, e.g. WISCA channel scaling, rely on it):
within a head of size hd, channel j is rotated together with channel
j + hd/2, for j in [0, hd/2). This is the HuggingFace `rotate_half`
convention, NOT the Meta/torchtitan interleaved (2j, 2j+1) convention.
Pair j rotates at frequency theta ** (-2j / hd), i.e. for position t:

    out[j]        = x[j] * cos(t w_j) - x[j + hd/2] * sin(t w_j)
    out[j + hd/2] = x[j + hd/2] * cos(t w_j) + x[j] * sin(t w_j)

So any per-channel rescaling of q/k that must commute with RoPE has to use
one shared scale for channels j and j + hd/2.
"""

import torch


def precompute_rope(
    head_dim: int, max_seq_len: int, theta: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (cos, sin), each float32 of shape [max_seq_len, head_dim].

    The per-pair angle is repeated on both halves so that `apply_rope` is
    a plain elementwise expression.
    """
    if head_dim % 2 != 0:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    # A model built on the meta device (counts, shapes) gets real tables: computing them through meta's
    # reference kernels would import torch._dynamo (seconds) for tensors nobody reads.
    device = None if torch.get_default_device().type != "meta" else torch.device("cpu")
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)
    positions = torch.arange(max_seq_len, dtype=torch.float64, device=device)
    angles = torch.outer(positions, inv_freq)  # [T, hd/2]
    angles = torch.cat([angles, angles], dim=-1)  # [T, hd]: channel j and j+hd/2 share an angle
    return angles.cos().float(), angles.sin().float()


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(x1, x2) -> (-x2, x1) on the two halves of the last dimension."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [..., T, head_dim] by cos/sin [T, head_dim]; math in float32."""
    x32 = x.float()
    return (x32 * cos + rotate_half(x32) * sin).to(x.dtype)
