"""Compose a run's config with Hydra from the repository's `conf/` plus override strings."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from lit_modules.config.schema import register_schema

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"


def compose_run_config(overrides: list[str]) -> DictConfig:
    register_schema()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))
