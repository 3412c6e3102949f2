"""The hooks through which a technique touches a run; every hook is optional.

A technique is one folder, `techniques/<name>/`: its plug-in class (registered under `<name>`, see
registry.py), its math, its callbacks and its report metadata (`report.yaml`: claim, curves, figures). Hydra
builds it from `techniques.<name>` (a node with `_target_`), so adding one means that folder, a config group
and a test file, with no edit to the LightningModule, the entry point, the sweep driver or the reports. A
diagnostic it motivates goes in `lit_modules/diagnostics/` (a function of any model: the baseline logs it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

from lit_modules.optim.param_groups import GroupSpec

if TYPE_CHECKING:  # Lightning is not imported by validation (issue 27 item 7: a refusal's first sentence fast)
    import lightning as L

    from lit_modules.config.technique_context import TechniqueContext


class Technique:
    name: str = "technique"

    def problems(self, cfg, context: TechniqueContext | None = None) -> list[str]:
        """Sentences describing why this technique cannot run with `cfg` (checked before any compute).

        `context` holds what validation already built for this run (the other techniques, the budget, the
        model on the meta device): ask it rather than building things again."""
        return []

    def transform_model(self, model: nn.Module) -> nn.Module:
        """Change the model at build time (structure, parametrization, init). Re-applied on resume, and
        applied to a meta-device copy during validation: keep no state the real run depends on."""
        return model

    def transform_loaded_model(self, model: nn.Module) -> nn.Module:
        """Change the model once its starting weights are in place: after initialization and after
        `init_from`'s weights are loaded (e.g. adapters computed from those weights). On resume and on a
        rebuild of a finished run it runs before that run's own weights are restored, which replace what it
        computed. Also applied to the meta-device copy during validation (no values there)."""
        return model

    def edit_param_groups(self, groups: list[GroupSpec]) -> None:
        """Adjust optimizer groups (learning-rate scales, decay) before the optimizer is built."""

    def loss_terms(self, logits: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Auxiliary training-loss terms (name -> scalar tensor) from this step's logits and batch.

        The LightningModule adds them to the training objective and logs each as `train/<name>`; the
        validation loss stays the plain next-token loss, so arms with and without a term compare directly."""
        return {}

    def callbacks(self) -> list[L.Callback]:
        """Training-time hooks (periodic transforms, estimators, diagnostics)."""
        return []

    def prepare_for_inference(self, model: nn.Module) -> nn.Module:
        """Turn the trained model into the one evaluation and export use (e.g. merge a reparametrization)."""
        return model

    def tags(self) -> dict[str, str]:
        """Run tags recording the technique's choices, e.g. which unconfirmed knobs were assumed."""
        return {}

    def has_loss_terms(self) -> bool:
        return type(self).loss_terms is not Technique.loss_terms
