"""The diagnostic registry and the types a diagnostic receives and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn


@dataclass
class DiagnosticContext:
    model: nn.Module  # the model as trained (possibly with technique parametrizations)
    tokens: torch.Tensor  # a fixed held-out batch [B, T], the same at every step of a run
    step: int
    artifact_dir: Path  # where a diagnostic may write files (heat-maps, histograms) to be logged


@dataclass
class DiagnosticResult:
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


Diagnostic = Callable[[DiagnosticContext], DiagnosticResult]
REGISTRY: dict[str, Diagnostic] = {}


def register(name: str) -> Callable[[Diagnostic], Diagnostic]:
    def wrap(fn: Diagnostic) -> Diagnostic:
        if name in REGISTRY and REGISTRY[name] is not fn:
            raise ValueError(f"A diagnostic named '{name}' is already registered.")
        REGISTRY[name] = fn
        return fn

    return wrap
