"""A technique is one folder with one name: its class (named by its config group's `_target_`), its typed
settings, its config group, preset, arms and claim all carry it, and validation builds and asks each
technique once, sharing what it built."""

from __future__ import annotations

from dataclasses import fields, is_dataclass

import pytest
import yaml
from hydra.utils import get_class
from omegaconf import OmegaConf

from lit_modules.config import files
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.technique_context import instantiate_techniques
from lit_modules.config.technique_groups import technique_groups
from lit_modules.config.validate import validated
from lit_modules.techniques import Technique
from lit_modules.config import technique_context as context_module
from lit_modules.techniques.mols import callback as mols_callback
from tests.helpers.arm_files import claim_arm_families
from tests.helpers.runs import REPO

FOLDERS = sorted(p.parent.name for p in (REPO / "lit_modules/techniques").glob("*/report.yaml"))
PACKAGES = sorted(p.parent.name for p in (REPO / "lit_modules/techniques").glob("*/__init__.py"))


def technique_class(name: str) -> type:
    """The class the group's options name (an option may inherit its `_target_` from another option)."""
    targets = {OmegaConf.load(p).get("_target_") for p in (files.CONF_DIR / name).glob("*.yaml")} - {None}
    assert len(targets) == 1, f"conf/{name}/ names {sorted(targets)}"
    return get_class(targets.pop())


def first_option(name: str) -> str:
    return sorted(p.stem for p in (files.CONF_DIR / name).glob("*.yaml"))[0]


def fullest_option(name: str) -> str:
    """The option that sets the most keys (the last such by name): the technique's main one."""
    keys = {o: len(compose_run_config([f"{name}={o}"]).techniques[name]) for o in
            sorted(p.stem for p in (files.CONF_DIR / name).glob("*.yaml"))}
    return max(reversed(keys), key=keys.get)


def test_every_plug_in_folder_is_a_config_group_and_nothing_else_names_it():
    assert technique_groups(files.CONF_DIR) == PACKAGES and set(PACKAGES) <= set(FOLDERS)
    assert not (REPO / "lit_modules/techniques/registry.py").exists()  # one mechanism: the group's _target_


@pytest.mark.parametrize("name", PACKAGES)
def test_the_group_names_the_folders_class_and_its_settings_sit_beside_it(name):
    for path in sorted((files.CONF_DIR / name).glob("*.yaml")):
        assert path.read_text().startswith(f"# @package techniques.{name}\n"), path
    cls = technique_class(name)
    assert issubclass(cls, Technique) and cls.__module__ == f"lit_modules.techniques.{name}.technique"
    assert is_dataclass(cls.Settings) and cls.Settings.__module__ == f"lit_modules.techniques.{name}.settings"
    # Every key of every option is a setting (or Hydra's own): the dataclass is the whole vocabulary.
    for option in sorted(p.stem for p in (files.CONF_DIR / name).glob("*.yaml")):
        node = compose_run_config([f"{name}={option}"]).techniques[name]
        assert {k for k in node if not k.startswith("_")} <= {f.name for f in fields(cls.Settings)}


@pytest.mark.parametrize("name", PACKAGES)
def test_a_technique_is_named_by_its_key(name):
    [technique], problems = instantiate_techniques(compose_run_config([f"{name}={first_option(name)}"]))
    assert problems == [] and technique.name == name and type(technique) is technique_class(name)
    assert technique_class(name)().name == name  # built by hand (a test): its folder's name, the same


SETTINGS = [(name, f.name) for name in PACKAGES for f in fields(technique_class(name).Settings)]


@pytest.mark.parametrize("name,setting", SETTINGS, ids=[f"{n}.{s}" for n, s in SETTINGS])
def test_every_setting_refuses_a_value_of_the_wrong_kind_in_one_sentence_naming_it(name, setting):
    """A word where the setting takes a number, a flag, a choice, a list or a mapping; a plain string (a group
    name) is refused by the technique's own check against what the run has."""
    cfg = compose_run_config([f"{name}={fullest_option(name)}", f"++techniques.{name}.{setting}=no_such_value"])
    with pytest.raises(ConfigError) as err:
        validated(cfg)
    [sentence] = str(err.value).splitlines()
    assert f"techniques.{name}.{setting}" in sentence and sentence.endswith(".") and "no_such_value" in sentence


def test_a_key_that_is_no_setting_is_refused_before_the_class_is_called():
    cfg = compose_run_config(["wisca=qk_vo_tensor", "+techniques.wisca.every_n_step=5"])
    with pytest.raises(ConfigError) as err:
        validated(cfg)
    assert str(err.value) == ("techniques.wisca.every_n_step is not a setting of wisca; its settings are qk, vo, "
                              "qk_granularity, vo_granularity, every_n_steps, at_init, opt_state, channel_reduce, "
                              "lora, lora_granularity.")


@pytest.mark.parametrize("name", FOLDERS)
def test_each_folder_has_its_preset_arms_and_claim(name):
    assert (REPO / "conf/experiment" / f"{name}.yaml").is_file()
    arms = {str(OmegaConf.load(p).ablation.arm) for p in (REPO / "conf/arm" / name).glob("*.yaml")}
    baseline = str(OmegaConf.load(REPO / "conf/experiment" / f"{name}.yaml").ablation.baseline)
    assert baseline in arms
    claim = yaml.safe_load((REPO / "lit_modules/techniques" / name / "report.yaml").read_text())["claim"]
    assert set(claim.get("headline") or []) <= claim_arm_families(name)  # this preset's or its evidence protocol's


def test_validation_builds_and_asks_each_technique_once(monkeypatch):
    built, callbacks = [], []
    for name in PACKAGES:
        cls = technique_class(name)

        def counted(self, *args, _init=cls.__init__, _name=name, **kwargs):
            built.append(_name)
            _init(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", counted)
    original = mols_callback.MoLSCallback.__init__
    monkeypatch.setattr(mols_callback.MoLSCallback, "__init__",
                        lambda self, **kw: (callbacks.append(1), original(self, **kw))[1])
    checked = validated(compose_run_config(["wisca=qk_vo_tensor", "pc_layer=level4", "mols=snr"]))
    assert sorted(built) == ["mols", "pc_layer", "wisca"]  # once each: WISCA's check used the shared ones
    assert callbacks == []  # MoLS checked its timing without building its callback
    assert sorted(t.name for t in checked.techniques) == sorted(built) and checked.budget.steps > 0
    # What WISCA was shown: the configured model on the meta device with the PC layer attached.
    model = context_module.TechniqueContext.of(checked.config, checked.techniques).model_as_trained("wisca")
    assert model.layers[0].attn.o_proj.parametrizations.weight.original.is_meta
    assert sorted(built) == ["mols", "pc_layer", "wisca"]
