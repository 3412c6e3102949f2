"""Technique plug-ins: one folder per paper's technique, each a `Technique` registered under its name.

Every folder that is a package is imported here (as `lit_modules.diagnostics` imports its modules), so its
plug-in class is registered; folders that only hold a `report.yaml` (a claim without
a plug-in object, e.g. small_init) are data for the reports.
"""

import importlib
import pkgutil

from lit_modules.techniques.base import Technique
from lit_modules.techniques.registry import TECHNIQUES, register

for _folder in pkgutil.iter_modules(__path__):
    if _folder.ispkg:
        importlib.import_module(f"{__name__}.{_folder.name}")

__all__ = ["TECHNIQUES", "Technique", "register"]
