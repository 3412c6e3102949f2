"""The PC layer's per-weight math as it was before the layers were batched by shape, kept verbatim as the
reference the batched code must reproduce (to float32 rounding): one weight at a time, `torch.mv`, `torch.dot`,
`torch.addmm`, the official normalization `v / (||v|| + eps)` after every half step."""

from __future__ import annotations

import torch

from lit_modules.techniques.pc_layer.polynomials import coefficients


def polynomial(wn: torch.Tensor, level: int) -> torch.Tensor:
    """p(Wn) = Wn q(Wn^T Wn) (tall) or q(Wn Wn^T) Wn (wide), Horner with addmm, one matrix."""
    coeffs = coefficients(level)
    if len(coeffs) == 1:
        return wn * coeffs[0]
    tall = wn.shape[0] >= wn.shape[1]
    gram = wn.mT @ wn if tall else wn @ wn.mT
    eye = torch.eye(gram.shape[0], dtype=gram.dtype, device=gram.device)
    q = gram * coeffs[-1] + eye * coeffs[-2]
    for c in reversed(coeffs[:-2]):
        q = torch.addmm(eye, gram, q, beta=c)
    return wn @ q if tall else q @ wn


def sigma(weight: torch.Tensor, u: torch.Tensor, v: torch.Tensor, eps: float) -> torch.Tensor:
    u = u.to(device=weight.device, dtype=weight.dtype)
    v = v.to(device=weight.device, dtype=weight.dtype)
    return torch.dot(u, torch.mv(weight, v)) + eps


def effective(weight, u, v, level: int, eps: float, recover_norm: bool, gamma) -> torch.Tensor:
    """gamma * sg(sigma) * p(W / sigma) (or without recovery / gamma), differentiable in W and gamma."""
    s = sigma(weight, u, v, eps)
    w_pc = polynomial(weight / s, level)
    if recover_norm:
        w_pc = w_pc * s.detach()
    if gamma is not None:
        w_pc = w_pc * gamma.to(dtype=w_pc.dtype)
    return w_pc


def _unit(vec: torch.Tensor, eps: float) -> torch.Tensor:
    return vec / (vec.norm() + eps)


@torch.no_grad()
def refresh(weight: torch.Tensor, u: torch.Tensor, v: torch.Tensor, iters: int, eps: float):
    """`iters` warm-started power-iteration steps in the buffers' working dtype; returns the new (u, v)."""
    dtype = torch.float64 if u.dtype == torch.float64 else torch.float32
    w = weight.detach().to(dtype=dtype, device=u.device)
    u, v = u.to(dtype), v.to(dtype)
    for _ in range(iters):
        v = _unit(torch.mv(w.mT, u), eps)
        u = _unit(torch.mv(w, v), eps)
    return u, v
