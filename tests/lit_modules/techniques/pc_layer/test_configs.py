"""The PC layer's config group, experiment preset and arms compose to what their names promise."""

import pytest
from tests.helpers.runs import REPO
from hydra.utils import instantiate

from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.techniques.pc_layer import PCLayer
from lit_modules.config.composition import compose_run_config

ARMS = {
    # arm: (optimizer, level or None, recover_norm, learnable_gamma)
    "adamw_baseline": ("adamw", None, None, None),
    "adamw_pc2": ("adamw", 2, True, True),
    "adamw_pc4": ("adamw", 4, True, True),
    "adamw_pc4_no_recover": ("adamw", 4, False, True),
    "adamw_pc4_no_gamma": ("adamw", 4, True, False),
    "muon_baseline": ("muon", None, None, None),
    "muon_pc2": ("muon", 2, True, True),
    "muon_pc4": ("muon", 4, True, True),
}


@pytest.mark.parametrize("level", range(5))
def test_pc_group_options(level):
    cfg = validate(compose_run_config([f"pc_layer=level{level}"]))
    technique = instantiate(cfg.techniques.pc_layer)
    s = technique.settings
    assert isinstance(technique, PCLayer) and s.level == level
    assert s.targets == ["gate_proj", "up_proj", "down_proj", "o_proj"]
    assert (s.recover_norm, s.learnable_gamma, s.power_iters, s.eps) == (
        True,
        True,
        10,
        1e-7,
    )


def test_bad_pc_settings_are_rejected_before_any_run():
    with pytest.raises(ConfigError, match="level must be one of"):
        validate(compose_run_config(["pc_layer=level4", "techniques.pc_layer.level=7"]))
    with pytest.raises(ConfigError, match="Unknown techniques.pc_layer.targets"):
        validate(compose_run_config(["pc_layer=level4", "techniques.pc_layer.targets=[o_proj,wq]"]))


def test_experiment_lists_every_arm_file():
    files = {p.stem for p in (REPO / "conf" / "arm" / "pc_layer").glob("*.yaml")}
    assert files == set(ARMS)
    text = (REPO / "conf" / "experiment" / "pc_layer.yaml").read_text()
    for arm in ARMS:
        assert f"pc_layer/{arm}" in text


@pytest.mark.parametrize("arm", sorted(ARMS))
def test_arms_compose_to_their_settings(arm):
    optimizer, level, recover, gamma = ARMS[arm]
    cfg = validate(compose_run_config(["experiment=pc_layer", f"+arm=pc_layer/{arm}"]))
    assert cfg.ablation.arm == arm and cfg.ablation.name == "pc_layer"
    assert cfg.model.name == "small" and cfg.trainer.max_steps == 400
    assert list(cfg.diagnostics.names) == ["gmcn"]
    assert cfg.optim.name == optimizer
    node = cfg.techniques.get("pc_layer")
    if level is None:
        assert node is None
    else:
        assert (node.level, node.recover_norm, node.learnable_gamma) == (level, recover, gamma)
