"""The PC layer's math on a stack of weights of one shape: every matrix of a shape group in the same calls.

For raw weights W (n, o, i), u (n, o), v (n, i) and gammas (n, 1), matrix k of the result is what the
official `PCLinear` computes for W[k] alone (see `parametrization.py`):

    sigma_k = u_k^T W_k v_k + eps          differentiable in W (u, v are constants)
    W_pc_k  = gamma_k * sg(sigma_k) * p(W_k / sigma_k)

The number of torch calls does not depend on n (batched products, one stack per input), and nothing here
reads a tensor's value on the host, so a step never waits for the device and the code traces as one graph.
A single weight is a stack of one (the same code, `PCParametrization`).

A shape group is a shape up to transposition: a wide (i, o) weight joins the tall (o, i) ones as its transpose
(`oriented`), since p(W^T) = p(W)^T (both forms use the same Gram matrix, that of the small side),
sigma(W^T) with u and v swapped is sigma(W), and its power iteration is the tall one's half-steps in the
other order (`stacked_power_iteration(flipped=...)`). Llama's FFN (gate, up: d_ff x d; down: d x d_ff) is
then one group, not two.
"""

from __future__ import annotations

import torch

from lit_modules.techniques.pc_layer.polynomials import odd_matrix_polynomial


def is_flipped(shape: tuple[int, ...]) -> bool:
    """Whether a weight of this (out, in) shape enters its group transposed (it is wide)."""
    return shape[-2] < shape[-1]


class _Oriented(torch.autograd.Function):
    """stack([W_0, ..., W_{t-1}, W_t^T, ..., W_{n-1}^T]) with a backward that hands each weight its gradient in
    the weight's own (contiguous) layout: the transposed block is made contiguous in one copy, so autograd never
    copies per weight (a transposed gradient view would not match the parameter's strides)."""

    @staticmethod
    def forward(ctx, tall: int, *weights: torch.Tensor) -> torch.Tensor:
        ctx.tall = tall
        return torch.stack([w if k < tall else w.mT for k, w in enumerate(weights)])

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        tall = ctx.tall
        grads = list(grad[:tall].unbind(0))
        if tall < grad.shape[0]:
            grads += list(grad[tall:].mT.contiguous().unbind(0))
        return (None, *grads)


def oriented(weights: list[torch.Tensor], tall: int) -> torch.Tensor:
    """(n, L, S): the first `tall` weights as they are, the others (wide, S x L) transposed; differentiable."""
    if tall == len(weights):
        return torch.stack(weights)
    return _Oriented.apply(tall, *weights)


def _like(t: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """t in ref's dtype and device; no call at all when it already is (the usual fp32 case)."""
    if t.dtype == ref.dtype and t.device == ref.device:
        return t
    return t.to(device=ref.device, dtype=ref.dtype)


def stacked_sigma(w: torch.Tensor, u: torch.Tensor, v: torch.Tensor, eps: float) -> torch.Tensor:
    """(n, 1, 1): u_k^T W_k v_k + eps for each matrix, with autograd through W; u, v in W's dtype."""
    wv = torch.bmm(w, _like(v, w).unsqueeze(-1))  # (n, o, 1): W v first, as the official mv
    return torch.bmm(_like(u, w).unsqueeze(1), wv) + eps


class _Normalized(torch.autograd.Function):
    """W / sigma per matrix, keeping W / sigma and sigma (not W) for the backward, so the stacked copy of the raw
    weights is freed as soon as the forward has normalized it: dW = g / sigma, dsigma = -<g, W / sigma> / sigma."""

    @staticmethod
    def forward(ctx, w: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        wn = w / sigma
        ctx.save_for_backward(wn, sigma)
        return wn

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        wn, sigma = ctx.saved_tensors
        grad_w = grad / sigma if ctx.needs_input_grad[0] else None
        grad_sigma = None
        if ctx.needs_input_grad[1]:  # one batched dot per matrix, no full-size product
            n = wn.shape[0]
            dot = torch.bmm(_like(grad, wn).reshape(n, 1, -1), wn.reshape(n, -1, 1))
            grad_sigma = _like(dot / sigma, sigma).neg()
        return grad_w, grad_sigma


def stacked_normalized(
    w: torch.Tensor, u: torch.Tensor, v: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(W / sigma, sigma) per matrix, differentiable in W; only these are kept, W itself can go."""
    sigma = stacked_sigma(w, u, v, eps)
    return _Normalized.apply(w, sigma), sigma


def stacked_preconditioned(
    wn: torch.Tensor, sigma: torch.Tensor, gamma: torch.Tensor | None, level: int, recover_norm: bool
) -> torch.Tensor:
    """gamma * sg(sigma) * p(W / sigma) from W / sigma. The factor gamma * sg(sigma) multiplies the polynomial's
    small side (`odd_matrix_polynomial(scale=)`), so the only full-size tensors kept for the backward are
    W / sigma and the result."""
    scale = sigma.detach() if recover_norm else None
    if gamma is not None:
        gamma = _like(gamma, sigma).view(-1, 1, 1)
        scale = gamma if scale is None else scale * gamma
    return odd_matrix_polynomial(wn, level, scale)


def stacked_effective(
    w: torch.Tensor,
    u: torch.Tensor,
    v: torch.Tensor,
    gamma: torch.Tensor | None,
    level: int,
    eps: float,
    recover_norm: bool,
) -> torch.Tensor:
    """(n, o, i): gamma * sg(sigma) * p(W / sigma) per matrix (no gamma when `gamma` is None)."""
    wn, sigma = stacked_normalized(w, u, v, eps)
    return stacked_preconditioned(wn, sigma, gamma, level, recover_norm)


@torch.no_grad()
def stacked_power_iteration(
    w: torch.Tensor, u: torch.Tensor, v: torch.Tensor, iters: int, eps: float, flipped: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """`iters` warm-started power-iteration steps on every matrix of w (n, o, i) at once, in w's dtype:
    v <- normalize(W^T u), then u <- normalize(W v), normalize(x) = x / (||x|| + eps) as in the official
    `update_sn_state`. Returns the new (u, v), (n, o) and (n, i).

    The last `flipped` matrices are transposes of their layers' weights (u and v swapped): for them the
    official order is u first, so they take one half-step alone before the common ones and the others one
    after, each matrix getting exactly its own 2 x iters half-steps in the official order."""
    if iters < 1:
        return u, v
    tall = w.shape[0] - flipped
    wt = w.mT
    col = _like(u, w).unsqueeze(-1)  # u, (n, o, 1)
    row = _like(v, w).unsqueeze(-1)  # v, (n, i, 1)
    if flipped:  # their first half-step: u <- normalize(W v) (their v <- normalize(W_layer^T u_layer))
        col = torch.cat([col[:tall], _unit(torch.bmm(w[tall:], row[tall:]), eps)])
    for half in range(2 * iters - (1 if flipped else 0)):
        if half % 2 == 0:
            row = _unit(torch.bmm(wt, col), eps)  # v <- normalize(W^T u)
        else:
            col = _unit(torch.bmm(w, row), eps)  # u <- normalize(W v)
    if flipped and tall:  # the others' last half-step
        col = torch.cat([_unit(torch.bmm(w[:tall], row[:tall]), eps), col[tall:]])
    return col.squeeze(-1), row.squeeze(-1)


def _unit(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Each matrix's vector over its norm + eps (the official normalization, eps in the denominator)."""
    return x / (torch.linalg.vector_norm(x, dim=1, keepdim=True) + eps)


__all__ = ["is_flipped", "oriented", "stacked_effective", "stacked_normalized", "stacked_power_iteration",
           "stacked_preconditioned", "stacked_sigma"]
