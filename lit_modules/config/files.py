"""The config files: where `conf/` is, which options a group has, and one option read on its schema.

Every module that reads `conf/` outside Hydra's composition goes through here (data preparation, the
fine-tune recipe, local tasks on another corpus, the sweep and evidence specs, the ablation presets,
`make bench`), so the folder is found one way and a missing option is reported one way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def group_dir(group: str) -> Path:
    """`conf/<group>/` (a nested group such as `experiment/evidence` is a path below conf/)."""
    return CONF_DIR / group


def is_group(name: str) -> bool:
    return group_dir(name).is_dir()


def option_path(group: str, option: str) -> Path:
    return group_dir(group) / f"{option}.yaml"


def has_option(group: str, option: str) -> bool:
    return option_path(group, option).is_file()


def options(group: str) -> list[str]:
    """The option names of a group (file stems of conf/<group>/*.yaml), sorted; empty if there is no group."""
    return sorted(p.stem for p in group_dir(group).glob("*.yaml"))


def missing_option_sentence(group: str, option: str, what: str | None = None) -> str:
    """One sentence: `option` is not in conf/<group>/, and which options are."""
    known = ", ".join(options(group)) or "none"
    return f"There is no {what or group} '{option}' in conf/{group}/ (known: {known})."


def load_option(group: str, option: str, schema: type | None = None) -> Any:
    """conf/<group>/<option>.yaml as a DictConfig, merged onto `schema` (a dataclass) when one is given.

    The file must exist (check with `has_option` first to word the refusal for the caller's verb).
    """
    from omegaconf import OmegaConf

    loaded = OmegaConf.load(option_path(group, option))
    return OmegaConf.merge(OmegaConf.structured(schema), loaded) if schema is not None else loaded
