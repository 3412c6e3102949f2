"""Technique plug-ins: one folder per paper's technique, each a `Technique` subclass with its settings beside it.

A run names a technique by its config group (`conf/<name>/`, packaged at `techniques.<name>`), whose options'
`_target_` is the class (Hydra builds it): the group is the one name, there is no other registry. Folders that
only hold a `report.yaml` (a claim without a plug-in object, e.g. small_init) are data for the reports.
"""

from lit_modules.techniques.base import Technique

__all__ = ["Technique"]
