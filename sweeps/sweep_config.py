"""The sweep's own settings, loaded from `conf/sweep/<name>.yaml` and checked against a schema."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import OmegaConf

from lit_modules.config import files
from lit_modules.config.errors import ConfigError
from sweeps.space import ParamSpec, parse_space

SWEEP_DIR = files.group_dir("sweep")
SAMPLERS = ("tpe", "random", "grid", "cmaes")
PRUNERS = ("none", "median", "successive_halving", "hyperband")


@dataclass
class SamplerConfig:
    name: str = "tpe"
    seed: int = 0
    n_startup_trials: int = 4


@dataclass
class PrunerConfig:
    name: str = "median"
    n_startup_trials: int = 2  # trials that finish before anything is pruned
    n_warmup_steps: int = 0  # steps before a trial can be pruned
    min_resource: int = 1  # successive halving / hyperband, in optimizer steps
    reduction_factor: int = 3


@dataclass
class SweepConfig:
    name: str = "default"
    study_name: str = "default"
    storage: Optional[str] = None  # None: sqlite:///<runs_dir>/optuna.db; any SQLAlchemy URL otherwise
    direction: str = "minimize"
    metric: str = "val/loss"
    n_trials: int = 8  # total finished (COMPLETE + PRUNED) trials, across invocations
    workers: int = 1
    runs_dir: str = "runs"
    experiment: str = "sweeps"  # MLflow experiment holding the parent and child runs
    heartbeat_interval: int = 10
    grace_period: int = 60  # a RUNNING trial silent this long was left by a dead worker: fail and retry it
    max_retry: int = 1
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    pruner: PrunerConfig = field(default_factory=PrunerConfig)
    overrides: List[str] = field(default_factory=list)  # base experiment for every trial
    space: Dict[str, Any] = field(default_factory=dict)


def load_sweep_config(name: str, dotlist: list[str]) -> tuple[SweepConfig, list[ParamSpec]]:
    path = SWEEP_DIR / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SWEEP_DIR.glob("*.yaml")))
        raise ConfigError(f"There is no sweep '{name}' in conf/sweep/ (known: {known}).")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(SweepConfig), OmegaConf.load(path), OmegaConf.from_dotlist(dotlist))
        cfg: SweepConfig = OmegaConf.to_object(merged)
        specs = parse_space(OmegaConf.to_container(merged.space, resolve=True))
    except ConfigError:
        raise
    except Exception as err:  # noqa: BLE001 - OmegaConf/parse errors become one sentence
        raise ConfigError(f"The sweep config '{name}' is invalid: {str(err).splitlines()[0]}") from err
    problems = [p for s in specs for p in s.problems()]
    if cfg.sampler.name not in SAMPLERS:
        problems.append(f"sweep.sampler.name must be one of {', '.join(SAMPLERS)}.")
    if cfg.pruner.name not in PRUNERS:
        problems.append(f"sweep.pruner.name must be one of {', '.join(PRUNERS)}.")
    if cfg.direction not in ("minimize", "maximize"):
        problems.append("sweep.direction must be minimize or maximize.")
    if cfg.n_trials < 1 or cfg.workers < 1:
        problems.append("sweep.n_trials and sweep.workers must be at least 1.")
    if not specs:
        problems.append(f"The sweep '{name}' declares no search space.")
    if problems:
        raise ConfigError("\n".join(problems))
    return cfg, specs
