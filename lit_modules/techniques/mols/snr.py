"""Gradient signal-to-noise ratio of parameter groups, from K per-micro-batch gradients.

Per coordinate, with sample mean mu and variance var over the K gradients:
  per_coord: mean over the group's coordinates of mu^2 / (var + eps * mean_var)
  aggregate: ||mu||^2 / (sum var * (1 + eps))
Both are UNCONFIRMED readings of the paper's "module-level SNR" (papers.md section 3).

`eps` is relative to the group's mean coordinate variance, so the estimate does not depend on the
gradient scale and no single coordinate can dominate the mean: under bf16 autocast a gradient
coordinate can repeat exactly across the K samples (var = 0), and an absolute eps of 1e-30 then let one
coordinate out of 25,000 push the group SNR to 1e18. A float64 `tiny` keeps all-zero-variance groups finite.

`debias=False` uses the plain pseudocode (population variance, squared sample mean). Its expectation is
biased towards 1/K for noise-dominated coordinates, because E[mu_hat^2] = mu^2 + sigma^2/K.
`debias=True` uses the unbiased variance and subtracts var/K from the squared mean (clamped at 0).

The gradients come from `torch.autograd.grad`, which never writes `.grad`. Every `.grad` and the RNG
states are still saved and put back, so a measurement cannot leak into the training step around it.
Memory is two fp32 copies of the measured parameters (Welford running mean and M2), whatever K is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

ESTIMATORS = ("per_coord", "aggregate")


@dataclass
class GradientMoments:
    """Running mean and sum of squared deviations (Welford) of one group's gradients, per coordinate."""

    mean: list[torch.Tensor] = field(default_factory=list)
    m2: list[torch.Tensor] = field(default_factory=list)
    count: int = 0

    @classmethod
    def like(cls, params: Sequence[torch.Tensor]) -> GradientMoments:
        zeros = [torch.zeros_like(p, dtype=torch.float32) for p in params]
        return cls(mean=zeros, m2=[z.clone() for z in zeros], count=0)

    def update(self, grads: Sequence[torch.Tensor]) -> None:
        # Welford keeps the variance accurate when the mean dominates (high SNR), unlike E[g^2] - mu^2.
        self.count += 1
        for mean, m2, g in zip(self.mean, self.m2, grads):
            g = g.detach().to(mean.dtype)
            delta = g - mean
            mean.add_(delta / self.count)
            m2.add_(delta * (g - mean))


def _signal_noise(moments: GradientMoments, debias: bool) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    """Per-tensor (signal, noise) in float64: (mu^2, var), debiased if asked."""
    k = moments.count
    for mean, m2 in zip(moments.mean, moments.m2):
        mean, m2 = mean.double(), m2.double()
        if debias:
            var = m2 / (k - 1)
            yield (mean.square() - var / k).clamp_min(0.0), var
        else:
            yield mean.square(), m2 / k


def group_snr(
    moments: GradientMoments,
    estimator: str = "per_coord",
    eps: float = 1e-3,
    debias: bool = False,
    ignore_dead_coords: bool = True,
) -> float:
    """One SNR number for a group. Dead coordinates (gradient exactly 0 in every sample, e.g. embedding
    rows of tokens absent from the K batches) carry no information; `ignore_dead_coords` leaves them out.
    Returns nan for a group with nothing to measure."""
    if estimator not in ESTIMATORS:
        raise ValueError(f"Unknown SNR estimator '{estimator}' (use {', '.join(ESTIMATORS)}).")
    if moments.count < 2:
        raise ValueError("The SNR needs at least 2 gradient samples.")
    k = moments.count

    def live_mask(mean: torch.Tensor, m2: torch.Tensor) -> torch.Tensor:
        return ((mean != 0) | (m2 != 0)) if ignore_dead_coords else torch.ones_like(mean, dtype=torch.bool)

    coords, signal_sum, noise_sum = 0, 0.0, 0.0
    for (signal, noise), mean, m2 in zip(_signal_noise(moments, debias), moments.mean, moments.m2):
        live = live_mask(mean, m2)
        coords += int(live.sum())
        noise_sum += float(noise[live].sum())
        # Aggregate debiasing subtracts the noise share from the summed squares and clamps once, at the end.
        raw = mean.double().square() - noise / k if debias else signal
        signal_sum += float(raw[live].sum())
    if coords == 0:
        return float("nan")
    tiny = torch.finfo(torch.float64).tiny
    if estimator == "aggregate":
        return max(signal_sum, 0.0) / (noise_sum * (1.0 + eps) + tiny)
    floor = eps * noise_sum / coords + tiny
    ratio_sum = 0.0
    for (signal, noise), mean, m2 in zip(_signal_noise(moments, debias), moments.mean, moments.m2):
        ratio_sum += float((signal / (noise + floor))[live_mask(mean, m2)].sum())
    return ratio_sum / coords


def measure_gradient_moments(
    loss_fn: Callable[[object], torch.Tensor],
    batches: Iterable[object],
    params_by_group: Mapping[str, Sequence[nn.Parameter]],
) -> dict[str, GradientMoments]:
    """Per-group gradient moments over `batches`, one backward per batch, leaving no trace:
    no `.grad` written, RNG states restored, nothing stepped."""
    groups = {name: list(ps) for name, ps in params_by_group.items() if ps}
    flat = [p for ps in groups.values() for p in ps]
    moments = {name: GradientMoments.like(ps) for name, ps in groups.items()}
    saved_grads = [p.grad for p in flat]
    devices = sorted({p.device.index or 0 for p in flat if p.device.type == "cuda"})
    try:
        with torch.random.fork_rng(devices=devices), torch.enable_grad():
            for batch in batches:
                loss = loss_fn(batch)
                grads = torch.autograd.grad(loss, flat, allow_unused=True)
                it = iter(grads)
                for name, ps in groups.items():
                    moments[name].update(
                        [g if g is not None else torch.zeros_like(p) for p, g in zip(ps, it)]
                    )
                del loss, grads
    finally:
        for p, g in zip(flat, saved_grads):
            p.grad = g
    return moments
