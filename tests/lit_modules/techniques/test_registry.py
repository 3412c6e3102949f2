"""A technique is one folder with one name: its class, config group, preset, arms and claim all carry it,
and validation builds and asks each technique once, sharing what it built."""

from __future__ import annotations

import pytest
import yaml
from hydra.utils import get_class
from omegaconf import OmegaConf

from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated
from lit_modules.techniques import TECHNIQUES, Technique
from lit_modules.config import technique_context as context_module
from lit_modules.techniques.mols import callback as mols_callback
from tests.helpers.arm_files import claim_arm_families
from tests.helpers.runs import REPO

FOLDERS = sorted(p.parent.name for p in (REPO / "lit_modules/techniques").glob("*/report.yaml"))


def test_every_folder_with_a_plug_in_registers_it_under_the_folder_name():
    packages = sorted(p.parent.name for p in (REPO / "lit_modules/techniques").glob("*/__init__.py"))
    assert sorted(TECHNIQUES) == packages and set(packages) <= set(FOLDERS)
    for name, cls in TECHNIQUES.items():
        assert issubclass(cls, Technique) and cls.name == name
        assert cls.__module__.startswith(f"lit_modules.techniques.{name}.")


@pytest.mark.parametrize("name", sorted(TECHNIQUES))
def test_the_config_group_builds_the_registered_class(name):
    options = sorted((REPO / "conf" / name).glob("*.yaml"))
    assert options, f"conf/{name}/ has no option"
    for path in options:
        assert path.read_text().startswith(f"# @package techniques.{name}\n"), path
        target = OmegaConf.load(path).get("_target_")
        if target is not None:  # an option may inherit its target from another option of the group
            cls = TECHNIQUES[name]
            assert get_class(target) is cls and target == f"lit_modules.techniques.{name}.{cls.__name__}"


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
    for name, cls in TECHNIQUES.items():
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
