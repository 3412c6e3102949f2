"""z-loss as a technique: `coef * mean(logsumexp(logits)^2)` added to the training objective.

    python -m lit_modules.train z_loss=default                           # coef 1e-4 (PaLM's value)
    python -m lit_modules.train z_loss=default techniques.z_loss.coef=1e-3

The term is logged as `train/z_loss`; `train/loss` and `val/loss` stay the next-token loss, so an arm with
the term and one without compare directly. What it claims to change (a smaller normalizer, fewer loss
spikes) is measured by the `logit_normalizer` diagnostic, which every arm can log (lit_modules/diagnostics/logit_normalizer.py).
"""

from __future__ import annotations

import torch

from lit_modules.techniques.base import Technique
from lit_modules.techniques.z_loss.normalizer import z_loss
from lit_modules.techniques.z_loss.settings import PAPER_COEF, ZLossSettings


class ZLoss(Technique):
    Settings = ZLossSettings
    settings: ZLossSettings  # its one check (a finite coef >= 0) is the setting's type: the base's problems()

    def loss_terms(self, logits: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {"z_loss": z_loss(logits, batch[1], float(self.settings.coef))}

    def tags(self) -> dict[str, str]:
        coef = self.settings.coef
        tags = {"z_loss.coef": f"{coef:g}"}
        if coef != PAPER_COEF:
            tags["fidelity.z_loss.coef"] = f"deviates (paper: {PAPER_COEF:g})"
        return tags
