"""Diagnostics: pure functions of a model (and a fixed held-out batch) that return named scalars.

Each module in this package registers its functions with `@register("name")`; a run lists the names it
wants under `diagnostics.names` and one callback (`callbacks/diagnostics.py`) logs them on a schedule.
Modules are discovered automatically, so adding a diagnostic touches no other file.
"""

import importlib
import pkgutil

from lit_modules.diagnostics.registry import REGISTRY, DiagnosticContext, DiagnosticResult, register

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["REGISTRY", "DiagnosticContext", "DiagnosticResult", "register"]
