"""Llama-style decoder in plain PyTorch (no Lightning/Hydra imports here).

The names below load on first use (PEP 562): the config schema imports `lit_modules.model.config`, a plain
dataclass, and must not pay torch's import (seconds) before a bad config is refused or `--help` answers.
"""

from importlib import import_module

_HOMES = {
    "LlamaConfig": ".config",
    "Llama": ".transformer",
    "InitConfig": ".init_config",
    "init_weights": ".init",
    "count_parameters": ".counting",
    "flops_per_token": ".counting",
}

__all__ = list(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(_HOMES[name], __name__), name)
    globals()[name] = value  # loaded once
    return value
