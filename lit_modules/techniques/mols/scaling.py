"""MoLS learning-rate multipliers: alpha from the group SNRs, and the ramp from 1 to alpha during warmup.

alpha_m = sqrt(S_base / S_m): Adam's update magnitude shrinks roughly like sqrt(SNR) in noisy modules,
so this multiplier equalizes the effective step across modules (papers.md section 3, [DERIVED]).
Pure functions of numbers; no torch, no Lightning.
"""

from __future__ import annotations

import math

RAMP_SHAPES = ("linear", "cosine", "step")


def alpha_from_snr(
    snr: float, base_snr: float, clip_min: float | None = None, clip_max: float | None = None
) -> float:
    """sqrt(base_snr / snr), optionally clipped; 1.0 when either SNR is not a positive finite number.

    The fallback keeps a group at the shared schedule rather than at a zero or infinite rate.
    """
    if not (math.isfinite(snr) and math.isfinite(base_snr) and snr > 0 and base_snr > 0):
        alpha = 1.0
    else:
        alpha = math.sqrt(base_snr / snr)
    if clip_min is not None:
        alpha = max(alpha, clip_min)
    if clip_max is not None:
        alpha = min(alpha, clip_max)
    return alpha


def ramp(step: int, start: int, end: int, alpha: float, shape: str = "linear") -> float:
    """Multiplier at optimizer step `step`: 1 up to `start`, alpha from `end` on, `shape` in between.

    linear: 1 + (alpha - 1) * r with r = (step - start) / (end - start);
    cosine: the same with r eased as (1 - cos(pi r)) / 2 (zero slope at both ends);
    step:   alpha from `start` on (no transition; the ablation of the smooth ramp).
    """
    if shape not in RAMP_SHAPES:
        raise ValueError(f"Unknown ramp shape '{shape}' (use {', '.join(RAMP_SHAPES)}).")
    if step < start:
        return 1.0
    if shape == "step" or step >= end:
        return alpha
    r = (step - start) / (end - start)
    if shape == "cosine":
        r = 0.5 * (1.0 - math.cos(math.pi * r))
    return 1.0 + (alpha - 1.0) * r


def planned_steps(total_steps: int, warmup_steps: int | None, warmup_fraction: float, estimate_step: int | None,
                  estimate_fraction: float) -> tuple[int, int]:
    """(estimation step, end of warmup) for a run of `total_steps`, as budget.py lays out warmup; a pure
    function of the config, so validation checks the timing without building the callback."""
    warmup = warmup_steps if warmup_steps is not None else round(warmup_fraction * total_steps)
    warmup = min(warmup, total_steps)
    at = estimate_step if estimate_step is not None else math.ceil(estimate_fraction * total_steps)
    return at, warmup
