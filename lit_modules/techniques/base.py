"""The hooks through which a technique touches a run; every hook is optional.

A technique is one folder, `techniques/<name>/`: its plug-in class, its settings (a dataclass in
`settings.py`, the class's `Settings`), its math, its callbacks and its report metadata (`report.yaml`: claim,
curves, figures). Hydra builds it from `techniques.<name>`, a node whose `_target_` names the class and whose
other keys are its settings; `<name>` is the technique's one name (its folder, its config group `conf/<name>/`,
its preset and arms). Adding one means that folder, a config group and a test file, with no edit to the
LightningModule, the entry point, the sweep driver or the reports. A diagnostic it motivates goes in
`lit_modules/diagnostics/` (a function of any model: the baseline logs it too).

Settings are checked by their types (lit_modules/typed_settings.py: one sentence per bad value) in
`problems()`, before any compute; `problems()` adds what spans several settings or the run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from torch import nn

from lit_modules.optim.param_groups import GroupSpec
from lit_modules.typed_settings import typed_problems

if TYPE_CHECKING:  # Lightning is not imported by validation: a refusal's first sentence comes fast
    import lightning as L

    from lit_modules.config.technique_context import TechniqueContext


def plain(value: Any) -> Any:
    """Hydra hands list and dict settings over as OmegaConf containers, a caller may pass a tuple: the
    settings hold plain lists and dicts."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return list(value) if isinstance(value, tuple) else value


def folder_name(cls: type) -> str:
    """`lit_modules.techniques.<name>.<module>` -> <name>: a technique built by hand (a test) carries the name
    its config group would give it."""
    parts = cls.__module__.split(".")
    return parts[2] if parts[:2] == ["lit_modules", "techniques"] and len(parts) > 2 else cls.__name__.lower()


class Technique:
    Settings: ClassVar[type | None] = None  # its settings dataclass (settings.py in its folder); None: none

    def __init__(self, **values: Any) -> None:
        # The name is the key under `techniques.` (config/technique_context.py sets it); built by hand, the folder.
        self.name = folder_name(type(self))
        if self.Settings is None:
            if values:
                raise TypeError(f"{type(self).__name__} takes no settings, and was given {', '.join(values)}.")
            self.settings = None
            return
        self.settings = self.Settings(**{key: plain(value) for key, value in values.items()})

    def settings_problems(self) -> list[str]:
        """A sentence per setting whose value its type refuses (`techniques.<name>.<setting> must be ...`)."""
        return typed_problems(self.settings, f"techniques.{self.name}") if self.settings is not None else []

    def problems(self, cfg: Any = None, context: TechniqueContext | None = None) -> list[str]:
        """Sentences describing why this technique cannot run with `cfg` (checked before any compute): its
        settings' own checks, then (in a technique that overrides this) what spans settings or the run.

        `context` holds what validation already built for this run (the other techniques, the budget, the
        model on the meta device): ask it rather than building things again."""
        return self.settings_problems()

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
