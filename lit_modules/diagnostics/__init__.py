"""Diagnostics: pure functions of a model (and a fixed held-out batch) that return named scalars.

Each module in this package registers its functions with `@register("name")`; a run lists the names it
wants under `diagnostics.names` and one callback (`callbacks/diagnostics.py`) logs them on a schedule.
Modules are discovered automatically, so adding a diagnostic touches no other file. A diagnostic a
technique motivates (e.g. `logit_normalizer` for z-loss) lives here too, as a function of any model, so every
arm of an ablation (the baseline included) can measure it and this package imports no technique.
"""

import importlib
import pkgutil

from lit_modules.diagnostics.registry import REGISTRY, DiagnosticContext, DiagnosticResult, register

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "DiagnosticContext", "DiagnosticResult", "register"]
