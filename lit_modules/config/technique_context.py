"""What validation knows of a run when it asks its techniques: built once, shared by every technique.

    context = TechniqueContext.of(cfg)          # the techniques built from cfg (once) and the budget
    model = context.model_as_trained("wisca")   # the configured model on the meta device, with every
                                                # other technique's build-time transform applied

The training entry point validates with one context and trains with the same technique objects, so a
technique is instantiated once per run and never rebuilt to answer another technique's question.

It lives in config/, beside the budget it carries, because validation asks it: the techniques are built by
their configs' `_target_` (Hydra), so config/ imports no technique and techniques/ sits above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

if TYPE_CHECKING:  # annotations only: validation imports this module before it knows torch is needed
    from torch import nn


def instantiate_techniques(cfg: Any) -> tuple[list, list[str]]:
    """The techniques of `cfg.techniques` (name -> node with `_target_`), and a sentence per node that
    cannot be built. Each technique's `name` is its key: the one name of a technique (its config group)."""
    from hydra.utils import instantiate

    built, problems = [], []
    for name, node in (cfg.get("techniques") or {}).items():
        if node is None:
            continue
        unknown = _unknown_settings(name, node)
        if unknown:
            problems += unknown
            continue
        try:
            technique = instantiate(node)
        except Exception as err:  # noqa: BLE001 - reported as a sentence, never swallowed silently
            cause = err.__cause__ or err
            problems.append(f"Technique '{name}' cannot be built from its config: {cause}")
            continue
        technique.name = name
        built.append(technique)
    return built, problems


def _unknown_settings(name: str, node: Any) -> list[str]:
    """A sentence naming the keys of `techniques.<name>` that its class's settings dataclass lacks (a typo
    such as `+techniques.pc_layer.levle=2`), before the class is called with them."""
    from hydra.utils import get_class

    from lit_modules.typed_settings import setting_names, unknown_setting_problems

    try:
        settings = getattr(get_class(str(node.get("_target_"))), "Settings", None)
    except Exception:  # noqa: BLE001 - an unknown target is reported by instantiate, as before
        return []
    if settings is None:
        return []
    given = {k: None for k in node if not str(k).startswith("_")}  # _target_, _recursive_: Hydra's own keys
    return unknown_setting_problems(setting_names(settings), given, f"techniques.{name}", name)


def meta_model(cfg: Any) -> nn.Module | None:
    """The configured model built on the meta device (no memory, no compute), or None if it cannot be."""
    from lit_modules.model.meta import meta_llama

    params = OmegaConf.to_container(cfg.model, resolve=True)
    params["vocab_size"] = params.get("vocab_size") or 1  # the vocabulary does not change the attention blocks
    try:
        return meta_llama(params)
    except Exception:  # noqa: BLE001 - an unbuildable model config is reported by the model's own check
        return None


@dataclass
class TechniqueContext:
    cfg: Any
    techniques: list = field(default_factory=list)
    budget: Any | None = None  # None where the budget cannot be computed (the core checks say why)
    _models: dict[str, nn.Module | None] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, cfg: Any, techniques: list | None = None) -> TechniqueContext:
        from lit_modules.config.budget import compute_budget

        if techniques is None:
            techniques, _ = instantiate_techniques(cfg)
        try:
            budget = compute_budget(cfg)
        except Exception:  # noqa: BLE001 - a broken budget is reported by the core validator
            budget = None
        return cls(cfg, list(techniques), budget)

    def model_as_trained(self, without: str) -> nn.Module | None:
        """The configured model on the meta device with the build-time transforms (`transform_model`, then
        `transform_loaded_model`) of every technique except the one named `without` (the asker) applied; None when it cannot be built (that technique's own
        problems() says why). Built once per asker."""
        if without not in self._models:
            model = meta_model(self.cfg)
            others = [t for t in self.techniques if t.name != without]
            try:
                for technique in others:
                    if model is not None:
                        model = technique.transform_model(model)
                for technique in others:
                    if model is not None:
                        model = technique.transform_loaded_model(model)
            except Exception:  # noqa: BLE001 - the failing technique's problems() reports why
                model = None
            self._models[without] = model
        return self._models[without]
