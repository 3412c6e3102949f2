"""Run names that say what a run is, unique within its experiment.

MLflow's own names ("overjoyed-slug-911") come from Python's `random`, which `seed_everything` has just
seeded with the run seed: every seed-0 run of every arm drew the same name. A run is therefore always
given a name here, before the run is created:

    <preset>/<arm>/seed<k>              a grid cell (ablation.name and ablation.arm set)
    <study>/trial-<n>                   a sweep trial (named by the sweep driver)
    finetune/<base name>                a fine-tune (named by lit_modules.finetune)
    <preset or model>-<hash>-seed<k>    any other run (the first 7 characters of its config hash)

A name already taken in the experiment (a rerun of a cell after a failure) gets `-2`, `-3`, ...
"""

from __future__ import annotations

import re

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig

HASH_CHARS = 7


def base_run_name(cfg: DictConfig, config_hash: str) -> str:
    """What the run is: the configured name, or one made from its cell, preset or model, hash and seed."""
    if cfg.logger.run_name:
        return str(cfg.logger.run_name)
    if cfg.ablation.name and cfg.ablation.arm:
        return f"{cfg.ablation.name}/{cfg.ablation.arm}/seed{cfg.seed}"
    return f"{cfg.ablation.name or cfg.model.name}-{config_hash[:HASH_CHARS]}-seed{cfg.seed}"


def unique_run_name(client: MlflowClient, experiment_id: str, name: str) -> str:
    """`name`, or `name-<k>` with the smallest k >= 2 that no run of the experiment has."""
    quoted = name.replace("'", "''")
    taken = {
        run.info.run_name
        for run in client.search_runs([experiment_id], filter_string=f"attributes.run_name LIKE '{quoted}%'",
                                      max_results=10_000)
    }
    if name not in taken:
        return name
    suffix = re.compile(re.escape(name) + r"-(\d+)$")
    used = [int(m.group(1)) for m in map(suffix.match, (t or "" for t in taken)) if m]
    return f"{name}-{max([1, *used]) + 1}"
