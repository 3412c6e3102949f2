"""The default sweep space never draws a WISCA x PC combination that is refused or inexact."""

from __future__ import annotations

import copy

import pytest
from omegaconf import DictConfig

from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validate
from tests.helpers.wisca_pc import check_periodic_transition


# ------------------------------------------------------------------ the default sweep space


def _categorical_walk(specs, first_only: tuple[str, ...] = ()) -> list[dict]:
    """Every combination of the space's categorical choices (respecting `when`), numbers at their low end;
    keys in `first_only` take their first choice only."""
    combos: list[dict] = [{}]
    for spec in specs:
        grown = []
        for sampled in combos:
            active = all(sampled.get(dep) in allowed for dep, allowed in (spec.when or {}).items())
            if not active:
                grown.append(sampled)
            elif spec.type == "categorical":
                choices = spec.choices[:1] if spec.key in first_only else spec.choices
                grown += [{**sampled, spec.key: choice} for choice in choices]
            else:
                grown.append({**sampled, spec.key: spec.low})
        combos = grown
    return combos


def _walk_default_space(first_only: tuple[str, ...]) -> None:
    """Each combination validates, and each one with WISCA keeps the model's function through a transition
    on the real built model (the exactness depends on the model and the technique stack, not the period)."""
    from omegaconf import OmegaConf

    from sweeps.space import as_overrides
    from sweeps.sweep_config import load_sweep_config

    sweep_cfg, specs = load_sweep_config("default", [])
    combos = _categorical_walk(specs, first_only)
    assert any(c.get("wisca") and c.get("pc_layer") for c in combos)
    composed: dict[tuple, DictConfig] = {}  # Hydra composes the group choices; values are set on a copy
    with_wisca = 0
    for sampled in combos:
        groups = tuple((k, v) for k, v in sampled.items() if "." not in k)
        if groups not in composed:
            composed[groups] = compose_run_config([*sweep_cfg.overrides, *as_overrides(dict(groups))])
        cfg = copy.deepcopy(composed[groups])
        for key, value in sampled.items():
            if "." in key:
                OmegaConf.update(cfg, key, value, force_add=False)
        cfg = validate(cfg)
        if cfg.techniques.get("wisca") is not None and sampled["techniques.wisca.every_n_steps"] == 50:
            cfg.techniques.wisca.opt_state = "rescale"
            check_periodic_transition(cfg)
            with_wisca += 1
    assert with_wisca >= 16


def test_default_sweep_space_never_draws_a_refused_or_inexact_combination():
    """Walk the default `make sweep` space: every combination of its model and technique choices (the
    WISCA period at its first choice; the slow test below walks every period too)."""
    _walk_default_space(first_only=("techniques.wisca.every_n_steps",))


@pytest.mark.slow
def test_every_categorical_combination_of_the_default_sweep_space():
    _walk_default_space(first_only=())
