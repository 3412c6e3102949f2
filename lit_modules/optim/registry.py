"""The optimizer registry: an optimizer is one module of lit_modules/optim/ (its class where torch has none,
its settings dataclass, its builder) that registers itself; `optim.name` picks it.

    @dataclass
    class SignumSettings:                 # fields of its own; None: it has none beyond the shared ones
        momentum: Annotated[float, Bound(ge=0, lt=1)] = 0.9

    @register_optimizer("signum", settings=SignumSettings)
    def build(groups: list[GroupSpec], cfg, model) -> torch.optim.Optimizer: ...

Every optimizer reads the shared fields of `optim` (lr, betas, eps, weight_decay, wd_exclude, grad_clip). Its own
settings are fields of `optim` where the schema holds them flat (the shipped optimizers': muon_lr, ...,
lamb_trust_no_decay, in every recorded run's identity), else entries of `optim.settings`; either way they are
checked by their types (lit_modules/typed_settings.py) before any compute. optim/build.py builds the chosen one
and config/validate.py asks `optimizer_problems`. The optimizers' modules import torch, which this module does
not: they are imported when the registry is first asked, so a refusal found earlier never loads torch.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, fields
from typing import Any, Callable

from lit_modules.typed_settings import setting_names, typed_problems, unknown_setting_problems

Builder = Callable[..., Any]  # (group specs, the optim config, the model) -> torch.optim.Optimizer


@dataclass(frozen=True)
class OptimizerSpec:
    name: str
    build: Builder
    settings: type | None = None  # the dataclass of its own settings
    # The optimizer classes it builds that take Adam's per-coordinate normalized step: MoLS scales their rates.
    adam_family: tuple[type, ...] = ()
    tags: Callable[[Any], dict[str, str]] | None = None  # run tags for choices no reference fixes


_SPECS: dict[str, OptimizerSpec] = {}


def register_optimizer(name: str, settings: type | None = None, adam_family: tuple[type, ...] = (),
                       tags: Callable[[Any], dict[str, str]] | None = None) -> Callable[[Builder], Builder]:
    def wrap(build: Builder) -> Builder:
        known = _SPECS.get(name)
        if known is not None and known.build.__module__ != build.__module__:
            raise ValueError(f"An optimizer named '{name}' is already registered ({known.build.__module__}).")
        _SPECS[name] = OptimizerSpec(name, build, settings, tuple(adam_family), tags)
        return build

    return wrap


def optimizer_specs() -> dict[str, OptimizerSpec]:
    """Every registered optimizer by name (sorted), each module of lit_modules/optim/ imported once."""
    import lit_modules.optim as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
    return dict(sorted(_SPECS.items()))


def optimizer_spec(name: str) -> OptimizerSpec:
    specs = optimizer_specs()
    if name not in specs:
        raise ValueError(f"optim.name must be one of {', '.join(specs)}, not '{name}'.")
    return specs[name]


def adam_family() -> tuple[type, ...]:
    return tuple(cls for spec in optimizer_specs().values() for cls in spec.adam_family)


def settings_of(spec: OptimizerSpec, optim_cfg: Any) -> Any:
    """The spec's settings dataclass filled from `optim_cfg` (flat fields, then optim.settings); None: none."""
    if spec.settings is None:
        return None
    extra = optim_cfg.get("settings") or {}
    values = {f.name: optim_cfg[f.name] if f.name in optim_cfg else extra[f.name]
              for f in fields(spec.settings) if f.name in optim_cfg or f.name in extra}
    return spec.settings(**values)


def optimizer_problems(optim_cfg: Any) -> list[str]:
    """A sentence for an unknown optimizer, for each of its settings its type refuses or it does not have, and
    for another optimizer's setting the run sets (one whose default None means "not used")."""
    specs = optimizer_specs()
    name = optim_cfg.name
    if name not in specs:
        return [f"optim.name must be one of {', '.join(specs)}, not '{name}'."]
    spec, problems = specs[name], []
    for other in specs.values():
        for f in fields(other.settings) if other.settings is not None and other is not spec else ():
            if f.default is None and f.name in optim_cfg and optim_cfg[f.name] is not None:
                problems.append(f"optim.{f.name} applies to optim={other.name} only, and this run's optimizer "
                                f"is {name}.")
    own = setting_names(spec.settings)
    extra = dict(optim_cfg.get("settings") or {})
    nested = [f for f in own if f not in optim_cfg]  # the settings the schema does not hold flat
    problems += unknown_setting_problems(nested, extra, "optim.settings", f"optim={name}")
    if spec.settings is not None and not problems:
        keys = {f: f"optim.{f}" if f in optim_cfg else f"optim.settings.{f}" for f in own}
        problems += typed_problems(settings_of(spec, optim_cfg), "optim", keys)
    return problems

