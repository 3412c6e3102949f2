"""The technique registry: every technique folder registers its plug-in class under its one name.

    @register("wisca")
    class Wisca(Technique): ...

The name is the folder (`techniques/wisca/`), the config group (`conf/wisca/`, packaged at
`techniques.wisca`), the preset (`conf/experiment/wisca.yaml`), the arm folder (`conf/arm/wisca/`) and the
claim key (`techniques/wisca/report.yaml`). Importing `lit_modules.techniques` imports every folder, as
`lit_modules.diagnostics` does its modules, so adding a technique touches no other file.
"""

from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T", bound=type)
TECHNIQUES: dict[str, type] = {}


def register(name: str) -> Callable[[T], T]:
    def wrap(cls: T) -> T:
        if name in TECHNIQUES and TECHNIQUES[name] is not cls:
            raise ValueError(f"A technique named '{name}' is already registered ({TECHNIQUES[name].__module__}).")
        cls.name = name
        TECHNIQUES[name] = cls
        return cls

    return wrap
