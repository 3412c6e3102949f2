"""Diagnostics: pure functions of a model (and a fixed held-out batch) that return named scalars.

Each module in this package registers its functions with `@register("name")`; a run lists the names it
wants under `diagnostics.names` and one callback (`callbacks/diagnostics.py`) logs them on a schedule.
Modules are discovered automatically, so adding a diagnostic touches no other file. A technique's own
diagnostics live in its folder (`techniques/<name>/diagnostics.py`) and are discovered too, so every arm of
an ablation (the baseline included) can measure them.
"""

import importlib
import pkgutil
from pathlib import Path

from lit_modules.diagnostics.registry import REGISTRY, DiagnosticContext, DiagnosticResult, register

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "registry":
        importlib.import_module(f"{__name__}.{_module.name}")
for _technique in sorted((Path(__file__).resolve().parents[1] / "techniques").glob("*/diagnostics.py")):
    importlib.import_module(f"lit_modules.techniques.{_technique.parent.name}.diagnostics")

__all__ = ["REGISTRY", "DiagnosticContext", "DiagnosticResult", "register"]
