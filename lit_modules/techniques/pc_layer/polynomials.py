"""The PC layer's odd polynomials p(s) = c1 s + c3 s^3 + ... (arXiv 2606.06470, official code).

Level k has degree 2k+1. The coefficients are the ones hard-coded in the authors' release
(`torchtitan/pc_layer/pc_layer.py`, see shared/reference/papers.md section 4); each set sums to 1, so
p(1) = 1 and the top singular value of a spectrally normalized matrix stays at 1 while the small ones
are lifted by about p'(0) = c1. Level 0 is the identity (spectral normalization only).

The paper fits these by weighted least squares to min(s/b, 1); its weights, grid and b could not be
read, and no simple refit reproduces the table (see `fit_odd_polynomial`), so the table is used as is.
"""

from __future__ import annotations

import torch

# level -> (c1, c3, c5, ...): the published table, never refitted.
PC_COEFFICIENTS: dict[int, tuple[float, ...]] = {
    0: (1.0,),
    1: (1.507, -0.507),
    2: (2.083, -1.643, 0.560),
    3: (2.909, -4.649, 4.023, -1.283),
    4: (3.625, -9.261, 14.097, -10.351, 2.890),
}

# Which optimizer the paper pairs each level with (released configs): AdamW -> 4, Muon -> 2.
PAPER_LEVEL_FOR_OPTIMIZER = {"adamw": 4, "muon": 2}


def coefficients(level: int) -> tuple[float, ...]:
    if level not in PC_COEFFICIENTS:
        raise ValueError(f"PC level must be one of {sorted(PC_COEFFICIENTS)}, not {level}.")
    return PC_COEFFICIENTS[level]


def odd_polynomial(s: torch.Tensor, level: int) -> torch.Tensor:
    """p(s) evaluated elementwise (Horner in s^2): the map PC applies to normalized singular values."""
    coeffs = coefficients(level)
    s2 = s * s
    q = torch.full_like(s, coeffs[-1])
    for c in reversed(coeffs[:-1]):
        q = q * s2 + c
    return s * q


def odd_matrix_polynomial(wn: torch.Tensor, level: int, scale: torch.Tensor | None = None) -> torch.Tensor:
    """p(Wn) (times `scale`, one factor per matrix) for one matrix (o, i) or a stack of one shape (n, o, i).

    p(Wn) = Wn q(Wn^T Wn) for a tall or square Wn, q(Wn Wn^T) Wn for a wide one: the Gram matrix is always
    formed on the smaller side (the cheaper one); both forms have the same singular vectors as Wn and map
    each singular value s to p(s). Cost: Gram + (level - 1) small-side products + the final product, i.e.
    level + 1 batched matrix products (none at level 0), whatever the number of matrices. A `scale`
    (broadcastable to (n, 1, 1)) multiplies the small q, not the large result: the same product, and no
    full-size intermediate to keep for the backward.
    """
    coeffs = coefficients(level)
    if len(coeffs) == 1:
        return wn * coeffs[0] if scale is None else wn * (scale * coeffs[0])
    if wn.dim() == 2:
        one = None if scale is None else scale.reshape(1, 1, 1)
        return odd_matrix_polynomial(wn.unsqueeze(0), level, one).squeeze(0)
    tall = wn.shape[-2] >= wn.shape[-1]
    gram = torch.bmm(wn.mT, wn) if tall else torch.bmm(wn, wn.mT)
    eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)  # broadcast over the stack
    q = gram * coeffs[-1] + eye * coeffs[-2]  # the innermost Horner step needs no product
    for c in reversed(coeffs[:-2]):
        q = torch.baddbmm(eye, gram, q, beta=c)  # c I + G q
    if scale is not None:
        q = q * scale
    return torch.bmm(wn, q) if tall else torch.bmm(q, wn)


def condition_number_after(low: float, level: int, high: float = 1.0, points: int = 100_001) -> float:
    """max p / min p over the normalized spectrum [low, high] (0 < low < high <= 1), on a dense grid.

    With low = 0.05 (input condition number 20) this gives 13.3 / 9.7 / 7.0 / 5.7 for levels 1..4
    (papers.md section 4, [DERIVED]; checked in tests).
    """
    s = torch.linspace(low, high, points, dtype=torch.float64)
    p = odd_polynomial(s, level)
    return (p.max() / p.min()).item()


def fit_odd_polynomial(
    degree: int, cutoff: float, weight: str = "uniform", points: int = 4001, pin_one: bool = True
) -> tuple[float, ...]:
    """Weighted least-squares odd polynomial of `degree` fitted to min(s/cutoff, 1) on [0, 1].

    A refit experiment only, never used by the layer. The paper's weights, grid and cutoff are
    UNCONFIRMED; with the simple choices offered here ("uniform", "s" = sigma-weighted, "chebyshev"
    = 1/sqrt(1-s^2)) the result does NOT reproduce the published table (tests document the gap).
    With `pin_one` the constraint p(1) = 1 is imposed (as in every published set).
    """
    if degree < 1 or degree % 2 == 0:
        raise ValueError(f"The degree of an odd polynomial must be odd and positive, not {degree}.")
    s = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
    if weight == "chebyshev":
        s = s[:-1]  # the weight 1/sqrt(1 - s^2) is infinite at s = 1
    target = torch.clamp(s / cutoff, max=1.0)
    w = {"uniform": torch.ones_like(s), "s": s, "chebyshev": 1.0 / torch.sqrt(1.0 - s * s)}.get(weight)
    if w is None:
        raise ValueError(f"Unknown weighting '{weight}'; use uniform, s or chebyshev.")
    powers = list(range(1, degree + 1, 2))
    basis = torch.stack([s**k for k in powers], dim=1)
    sw = w.sqrt()[:, None]
    if not pin_one:
        sol = torch.linalg.lstsq(basis * sw, target[:, None] * sw).solution[:, 0]
        return tuple(sol.tolist())
    # p(1) = 1: write c1 = 1 - sum(others) and solve for the others.
    reduced = basis[:, 1:] - basis[:, :1]
    rhs = target - basis[:, 0]
    if reduced.shape[1] == 0:
        return (1.0,)
    rest = torch.linalg.lstsq(reduced * sw, rhs[:, None] * sw).solution[:, 0]
    return (1.0 - rest.sum().item(), *rest.tolist())


def max_on_unit_interval(level: int, points: int = 100_001) -> tuple[float, float]:
    """(max p(s), argmax s) on [0, 1]: how far a level overshoots 1 (1.000 / 1.010 / 1.019 / 1.020)."""
    s = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
    p = odd_polynomial(s, level)
    i = int(torch.argmax(p))
    return p[i].item(), s[i].item()


def initial_slope(level: int) -> float:
    """p'(0) = c1: the factor by which PC lifts the smallest singular values."""
    return coefficients(level)[0]


__all__ = [
    "PAPER_LEVEL_FOR_OPTIMIZER",
    "PC_COEFFICIENTS",
    "coefficients",
    "condition_number_after",
    "fit_odd_polynomial",
    "initial_slope",
    "max_on_unit_interval",
    "odd_matrix_polynomial",
    "odd_polynomial",
]
