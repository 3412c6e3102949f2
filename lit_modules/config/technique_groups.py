"""Technique config groups found on disk, so a new technique's group needs no edit to `conf/config.yaml`.

A technique's options live in `conf/<name>/<option>.yaml` under `# @package techniques.<name>`. Hydra only
accepts `<name>=<option>` for a group in the defaults list, so every such group that `conf/config.yaml` does not
list itself (the shipped ones keep their place there, and with it the order their nodes compose in) is added
as `<name>: null` to the `technique_groups` config in Hydra's config store, which `conf/config.yaml` lists.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_PREFIX = "# @package techniques."
CONFIG_NAME = "technique_groups"


def technique_groups(conf_dir: Path) -> list[str]:
    """Every `conf/<name>/` whose options are packaged at `techniques.<name>`, sorted by name."""
    groups = []
    for folder in sorted(p for p in conf_dir.iterdir() if p.is_dir()):
        options = sorted(folder.glob("*.yaml"))
        if options and all(_package_line(o) == f"{PACKAGE_PREFIX}{folder.name}" for o in options):
            groups.append(folder.name)
    return groups


def _package_line(path: Path) -> str:
    with path.open() as f:
        return f.readline().strip()


def listed_groups(config_yaml: Path) -> set[str]:
    """The groups `conf/config.yaml` lists in its own defaults."""
    from omegaconf import OmegaConf

    defaults = OmegaConf.to_container(OmegaConf.load(config_yaml)).get("defaults") or []
    return {key for entry in defaults if isinstance(entry, dict) for key in entry}


def register_technique_groups(conf_dir: Path) -> list[str]:
    """Store the `technique_groups` config: each unlisted technique group, off (null) by default."""
    from hydra.core.config_store import ConfigStore

    listed = listed_groups(conf_dir / "config.yaml")
    found = [g for g in technique_groups(conf_dir) if g not in listed]
    ConfigStore.instance().store(name=CONFIG_NAME, node={"defaults": [{g: None} for g in found]})
    return found
