"""Search spaces declared in YAML: each key is a Hydra override key, each value a distribution.

    space:
      optim.lr:           {type: float, low: 1.0e-4, high: 3.0e-2, log: true}
      model:              {type: categorical, choices: [tiny, small]}
      techniques/pc_layer:      {type: categorical, choices: [none, pc]}
      techniques.pc_layer.level: {type: int, low: 1, high: 4, when: {techniques/pc_layer: [pc]}}

`when` makes a parameter conditional: it is sampled only if every named parameter took one of the
listed values, so an inactive parameter never appears in a trial. Declaration order is sampling order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    import optuna

TYPES = ("float", "int", "categorical")


@dataclass(frozen=True)
class ParamSpec:
    key: str
    type: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    step: float | None = None
    choices: tuple | None = None
    when: Mapping[str, tuple] | None = None

    def problems(self) -> list[str]:
        if self.type not in TYPES:
            return [f"Search parameter '{self.key}' has unknown type '{self.type}' (use {', '.join(TYPES)})."]
        if self.type == "categorical":
            return [] if self.choices else [f"Search parameter '{self.key}' needs a non-empty 'choices' list."]
        if self.low is None or self.high is None or self.low >= self.high:
            return [f"Search parameter '{self.key}' needs low < high."]
        if self.log and self.low <= 0:
            return [f"Search parameter '{self.key}' is log-scaled, so low must be positive."]
        return []


def parse_space(raw: Mapping[str, Mapping[str, Any]]) -> list[ParamSpec]:
    specs = []
    for key, body in raw.items():
        body = dict(body)
        when = body.pop("when", None)
        if when is not None:
            when = {k: tuple(v) if isinstance(v, (list, tuple)) else (v,) for k, v in dict(when).items()}
        choices = body.pop("choices", None)
        unknown = set(body) - {"type", "low", "high", "log", "step"}
        if unknown:
            raise ValueError(f"Search parameter '{key}' has unknown field(s): {', '.join(sorted(unknown))}.")
        specs.append(ParamSpec(key=key, choices=tuple(choices) if choices is not None else None, when=when, **body))
    declared = {s.key for s in specs}
    for spec in specs:
        for dep in (spec.when or {}):
            if dep not in declared:
                raise ValueError(f"Search parameter '{spec.key}' depends on '{dep}', which the space does not declare.")
    return specs


def _active(spec: ParamSpec, sampled: dict[str, Any]) -> bool:
    return all(dep in sampled and sampled[dep] in allowed for dep, allowed in (spec.when or {}).items())


def sample(trial: optuna.Trial, specs: list[ParamSpec]) -> dict[str, Any]:
    """Sample the active parameters in order; inactive ones are never suggested."""
    sampled: dict[str, Any] = {}
    for spec in specs:
        if not _active(spec, sampled):
            continue
        if spec.type == "float":
            sampled[spec.key] = trial.suggest_float(spec.key, spec.low, spec.high, log=spec.log, step=spec.step)
        elif spec.type == "int":
            step = int(spec.step or 1)
            sampled[spec.key] = trial.suggest_int(spec.key, int(spec.low), int(spec.high), log=spec.log, step=step)
        else:
            sampled[spec.key] = trial.suggest_categorical(spec.key, list(spec.choices))
    return sampled


def as_overrides(sampled: Mapping[str, Any]) -> list[str]:
    """Hydra override strings. `None` means "leave this group at its default", which for the technique
    groups is off; Hydra cannot select `null` for a group by override."""
    out = []
    for key, value in sampled.items():
        if value is None:
            continue
        out.append(f"{key}={repr(value) if isinstance(value, float) else value}")
    return out
