"""Compose a run's config from `conf/` and override strings; a composition error becomes one sentence.

Hydra and OmegaConf report a typo in several lines (reference types, a config search path, a hint to
set HYDRA_FULL_ERROR). Every entry point composes through here (train, sweep, ablate) or checks its
overrides with `override_error_sentence` (finetune), so each says the same thing: which key, option or
value is wrong and what is allowed.
"""

from __future__ import annotations

import difflib
import re
from typing import Iterable

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException, ValidationError
from omegaconf.nodes import BooleanNode, EnumNode, FloatNode, IntegerNode, StringNode

from lit_modules.config import files
from lit_modules.config.errors import ConfigError
from lit_modules.config.schema import register_schema

BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"
COMPOSITION_ERRORS = (HydraException, OmegaConfBaseException)


def compose_run_config(overrides: Iterable[str]) -> DictConfig:
    """The run config `python -m lit_modules.train <overrides>` would get; ConfigError if it cannot be composed."""
    register_schema()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(files.CONF_DIR), version_base="1.3"):
            return compose(config_name="config", overrides=list(overrides))
    except COMPOSITION_ERRORS as err:
        raise ConfigError(composition_error_sentence(err)) from err


def compose_multirun(overrides: Iterable[str]) -> list[DictConfig]:
    """Every job's config of `-m <overrides>`, composed as Hydra's basic sweeper will.

    Hydra checks the jobs too, but only after it has made the sweep folder; this runs first.
    Another sweeper plugin expands its own space, so only the shared part is composed for it (no jobs).
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    overrides = list(overrides)
    register_schema()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(files.CONF_DIR), version_base="1.3"):
            loader = GlobalHydra.instance().config_loader()
            base = loader.load_configuration("config", overrides, run_mode=RunMode.MULTIRUN)
            sweeper = base.hydra.sweeper
            if sweeper.get("_target_") != BASIC_SWEEPER:
                return []
            params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
            parsed = OverridesParser.create(config_loader=loader).parse_overrides([*params, *overrides])
            jobs = [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]
            return [loader.load_sweep_config(base, list(job)) for job in jobs]
    except COMPOSITION_ERRORS as err:
        raise ConfigError(composition_error_sentence(err)) from err


def sweep_forms(overrides: Iterable[str]) -> tuple[list[str], list[list[str]]]:
    """(the overrides with one value, and for each override that lists several its one-value forms):
    `optim.lr=1e-3,3e-3` -> ['optim.lr=1e-3', 'optim.lr=3e-3'], in the order Hydra's basic sweeper runs them.
    Only discrete sweeps (a,b / choice / range) expand; an interval is a search space, not a grid (ConfigError)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = list(overrides)
    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except COMPOSITION_ERRORS as err:
        raise ConfigError(composition_error_sentence(err)) from err
    fixed, swept = [], []
    for text, override in zip(overrides, parsed):
        if not override.is_sweep_override():
            fixed.append(text)
        elif override.is_interval_sweep():
            raise ConfigError(f"{text} is an interval, a search space for an Optuna sweep (make sweep); a grid lists "
                              "its values (key=a,b).")
        else:
            key = override.get_key_element()  # with its + / ++ / ~ prefix
            swept.append([f"{key}={value}" for value in override.sweep_string_iterator()])
    return fixed, swept


def composition_error_sentence(err: BaseException) -> str:
    """One sentence for a Hydra or OmegaConf composition error, naming the key or option and what is allowed."""
    if isinstance(err, MissingConfigException) and err.missing_cfg_file:
        return _missing_option_sentence(err.missing_cfg_file, err.options)
    if isinstance(err, OverrideParseException):
        return f"An override cannot be parsed ({_first_line(err)}); write key=value, +key=value or ~key."
    text = str(err)
    ambiguous = re.match(r"Ambiguous value for argument '([^']*)'", text)
    if ambiguous:
        return (f"{ambiguous.group(1)} lists several values; add -m to run one job per value, "
                "or write key=[a,b] for a list.")
    cause = err if isinstance(err, OmegaConfBaseException) else err.__cause__
    if isinstance(cause, OmegaConfBaseException):
        written = re.match(r"Could not override '([^']*)'", text)
        return override_error_sentence(cause, written.group(1) if written else None)
    return _sentence(f"The config cannot be composed: {_first_line(err)}")


def override_error_sentence(err: OmegaConfBaseException, key: str | None = None) -> str:
    """An OmegaConf error from setting `key` (an unknown key, or a value of the wrong type) as one sentence."""
    key = key or err.full_key or str(err.key)
    parent = err.parent_node if isinstance(err.parent_node, DictConfig) else None
    if isinstance(err, ValidationError):
        return _wrong_type_sentence(err, parent)
    if isinstance(err, (ConfigKeyError, AttributeError)):
        return unknown_key_sentence(key, err.full_key or key, parent)
    return _sentence(f"{key} cannot be set: {_first_line(err)}")


def unknown_key_sentence(written: str, missing: str, parent: DictConfig | None) -> str:
    """`written` is the key as typed; `missing` the first part of it that does not exist, under `parent`."""
    head, _, name = missing.rpartition(".")
    siblings = [str(k) for k in parent.keys() if k != "hydra"] if parent is not None else []
    if not siblings and head and files.is_group(name) and name not in ("hydra", "arm"):
        options = ", ".join(files.options(name))
        return (f"Unknown config key '{written}': {missing} exists only when a {name} option is selected "
                f"({name}=<option>, one of conf/{name}/: {options}).")
    where = f"'{head}'" if head else "the top level"
    close = difflib.get_close_matches(name, siblings, n=1, cutoff=0.6)
    if close:
        return f"Unknown config key '{written}' (not in the schema); the closest key is '{_join(head, close[0])}'."
    if parent is not None and OmegaConf.get_type(parent) is dict:
        return f"Unknown config key '{written}': {where} has no entry '{name}'; add one with +{written}=<value>."
    listed = f"{where} has {', '.join(siblings)}" if siblings else f"{where} has no keys"
    return f"Unknown config key '{written}' (not in the schema); {listed}."


def _wrong_type_sentence(err: ValidationError, parent: DictConfig | None) -> str:
    key = err.full_key or str(err.key)
    value = "null" if err.value is None else str(err.value)
    expected = _expected_type(parent, str(err.key)) if parent is not None else None
    if expected is None:
        return _sentence(f"{key}={value} has the wrong type: {_first_line(err)}")
    return f"{key}={value} has the wrong type: {key} expects {expected}."


def _expected_type(parent: DictConfig, key: str) -> str | None:
    try:
        node = parent._get_node(key)  # the schema's node for the field: it knows its type
    except Exception:  # noqa: BLE001 - no node: say what OmegaConf said instead
        return None
    kinds = ((BooleanNode, "true or false"), (IntegerNode, "an integer"), (FloatNode, "a number"),
             (StringNode, "a string"), (ListConfig, "a list such as [a,b]"), (DictConfig, "a mapping"))
    if isinstance(node, EnumNode):
        kind = "one of " + ", ".join(m.name for m in node.enum_type)
    else:
        kind = next((text for cls, text in kinds if isinstance(node, cls)), None)
    if kind is None:
        return None
    return f"{kind} or null" if node._is_optional() else kind


def _missing_option_sentence(missing_cfg_file: str, options) -> str:
    group, _, option = missing_cfg_file.rpartition("/")
    if not group:
        return f"There is no config '{option}' in conf/."
    known = list(options or []) or files.options(group)
    if not known and not files.is_group(group):
        return f"{group}={option}: there is no config group '{group}' in conf/."
    where = "" if group.startswith("hydra/") else f" (conf/{group}/)"
    return f"There is no option '{option}' in the config group '{group}'{where}; choose one of {', '.join(known)}."


def _join(head: str, name: str) -> str:
    return f"{head}.{name}" if head else name


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _sentence(text: str) -> str:
    return text if text.endswith((".", ")")) else text + "."
