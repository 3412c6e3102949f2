"""The hooks through which a technique touches a run; every hook is optional.

A technique is built by Hydra from `techniques.<name>` (a node with `_target_`), so adding one means a
file here, a config group and a test file, with no edit to the LightningModule, the entry point or the
sweep driver.
"""

from __future__ import annotations

import lightning as L
from torch import nn

from lit_modules.optim.param_groups import GroupSpec


class Technique:
    name: str = "technique"

    def problems(self, cfg) -> list[str]:
        """Sentences describing why this technique cannot run with `cfg` (checked before any compute)."""
        return []

    def transform_model(self, model: nn.Module) -> nn.Module:
        """Change the model at build time (structure, parametrization, init). Re-applied on resume."""
        return model

    def edit_param_groups(self, groups: list[GroupSpec]) -> None:
        """Adjust optimizer groups (learning-rate scales, decay) before the optimizer is built."""

    def callbacks(self) -> list[L.Callback]:
        """Training-time hooks (periodic transforms, estimators, diagnostics)."""
        return []

    def prepare_for_inference(self, model: nn.Module) -> nn.Module:
        """Turn the trained model into the one evaluation and export use (e.g. merge a reparametrization)."""
        return model

    def tags(self) -> dict[str, str]:
        """Run tags recording the technique's choices, e.g. which unconfirmed knobs were assumed."""
        return {}
