"""Optuna samplers and pruners chosen by name in the sweep config."""

from __future__ import annotations

import optuna

from sweeps.space import ParamSpec
from sweeps.sweep_config import PrunerConfig, SamplerConfig


def build_sampler(cfg: SamplerConfig, specs: list[ParamSpec]) -> optuna.samplers.BaseSampler:
    if cfg.name == "tpe":
        # group=True lets TPE model conditional parameters separately instead of mixing them.
        return optuna.samplers.TPESampler(
            seed=cfg.seed, n_startup_trials=cfg.n_startup_trials, multivariate=True, group=True
        )
    if cfg.name == "random":
        return optuna.samplers.RandomSampler(seed=cfg.seed)
    if cfg.name == "grid":
        grid = {}
        for spec in specs:
            if spec.type != "categorical":
                raise ValueError(f"The grid sampler needs categorical 'choices' for '{spec.key}'.")
            grid[spec.key] = list(spec.choices)
        return optuna.samplers.GridSampler(grid, seed=cfg.seed)
    if cfg.name == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=cfg.seed, n_startup_trials=cfg.n_startup_trials)
    raise ValueError(f"Unknown sampler '{cfg.name}'.")


def build_pruner(cfg: PrunerConfig) -> optuna.pruners.BasePruner:
    if cfg.name == "none":
        return optuna.pruners.NopPruner()
    if cfg.name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=cfg.n_startup_trials, n_warmup_steps=cfg.n_warmup_steps)
    if cfg.name == "successive_halving":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=cfg.min_resource, reduction_factor=cfg.reduction_factor)
    if cfg.name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=cfg.min_resource, reduction_factor=cfg.reduction_factor)
    raise ValueError(f"Unknown pruner '{cfg.name}'.")
