"""z-loss as a technique: `coef * mean(logsumexp(logits)^2)` added to the training objective.

    python -m lit_modules.train z_loss=default                           # coef 1e-4 (PaLM's value)
    python -m lit_modules.train z_loss=default techniques.z_loss.coef=1e-3

The term is logged as `train/z_loss`; `train/loss` and `val/loss` stay the next-token loss, so an arm with
the term and one without compare directly. What it claims to change (a smaller normalizer, fewer loss
spikes) is measured by the `logit_normalizer` diagnostic, which every arm can log (lit_modules/diagnostics/logit_normalizer.py).
"""

from __future__ import annotations

import math

import torch

from lit_modules.techniques.base import Technique
from lit_modules.techniques.registry import register
from lit_modules.techniques.z_loss.normalizer import z_loss

PAPER_COEF = 1e-4


@register("z_loss")
class ZLoss(Technique):
    def __init__(self, coef: float = PAPER_COEF):
        self.coef = coef  # checked in problems(), before any compute

    def problems(self, cfg=None, context=None) -> list[str]:
        coef = self.coef
        if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not math.isfinite(coef) or coef < 0:
            return [f"techniques.z_loss.coef must be a finite number >= 0, not {coef!r}."]
        return []

    def loss_terms(self, logits: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"z_loss": z_loss(logits, batch[1], float(self.coef))}

    def tags(self) -> dict[str, str]:
        tags = {"z_loss.coef": f"{self.coef:g}"}
        if self.coef != PAPER_COEF:
            tags["fidelity.z_loss.coef"] = f"deviates (paper: {PAPER_COEF:g})"
        return tags
