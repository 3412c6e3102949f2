"""Learning-rate schedules as multipliers of each group's peak LR, times the group's `lr_scale`.

The schedule is a pure function of the step; `lr_scale` is re-read every step, so techniques can
retune a group's rate (e.g. a ramp towards a module-wise multiplier) without owning a scheduler.
"""

from __future__ import annotations

import math
from typing import Callable

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler


def warmup_cosine(step: int, total: int, warmup: int, min_ratio: float) -> float:
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def warmup_stable_decay(step: int, total: int, warmup: int, min_ratio: float, decay_fraction: float) -> float:
    """Warmup, a flat stage, then a linear decay over the last `decay_fraction` of steps."""
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    decay_steps = max(1, int(round(decay_fraction * total)))
    decay_start = max(warmup, total - decay_steps)
    if step < decay_start:
        return 1.0
    progress = min(1.0, (step - decay_start) / max(1, total - decay_start))
    return 1.0 - (1.0 - min_ratio) * progress


def warmup_constant(step: int, total: int, warmup: int, min_ratio: float) -> float:
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    return 1.0


def schedule_fn(name: str, total: int, warmup: int, min_ratio: float, decay_fraction: float) -> Callable[[int], float]:
    if name == "cosine":
        return lambda s: warmup_cosine(s, total, warmup, min_ratio)
    if name == "wsd":
        return lambda s: warmup_stable_decay(s, total, warmup, min_ratio, decay_fraction)
    if name == "constant":
        return lambda s: warmup_constant(s, total, warmup, min_ratio)
    raise ValueError(f"Unknown schedule '{name}'.")


class GroupScaledSchedule(LRScheduler):
    """lr(group, step) = peak_lr(group) x schedule(step) x group['lr_scale']."""

    def __init__(self, optimizer: Optimizer, multiplier: Callable[[int], float]):
        self.multiplier = multiplier
        for group in optimizer.param_groups:
            group.setdefault("lr_scale", 1.0)
            group.setdefault("peak_lr", group["lr"])
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        m = self.multiplier(self.last_epoch)
        return [g["peak_lr"] * m * g["lr_scale"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        # The multiplier is rebuilt from config; only the step counter is state.
        return {"last_epoch": self.last_epoch, "_step_count": self._step_count}

    def load_state_dict(self, state_dict: dict) -> None:
        self.last_epoch = state_dict["last_epoch"]
        self._step_count = state_dict["_step_count"]
