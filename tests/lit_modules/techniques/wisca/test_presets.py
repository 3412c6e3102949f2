"""The WISCA experiment preset: it lists the paper's rows and each arm composes to its WISCA settings."""

import pytest

from lit_modules.config import files
from lit_modules.config.composition import compose_run_config


# ------------------------------------------------------------------ presets


ARMS = {
    "origin": None,
    "qk_tensor": dict(qk=True, vo=False, qk_granularity="tensor", every_n_steps=50, at_init=False),
    "vo_tensor": dict(qk=False, vo=True, vo_granularity="tensor", every_n_steps=50, at_init=False),
    "qk_vo_tensor": dict(qk=True, vo=True, qk_granularity="tensor", vo_granularity="tensor", every_n_steps=50),
    "qk_channel_vo_tensor": dict(qk=True, vo=True, qk_granularity="channel", vo_granularity="tensor",
                          every_n_steps=50),
    "qk_vo_tensor_init": dict(qk=True, vo=True, every_n_steps=0, at_init=True),
}


def test_experiment_preset_lists_the_paper_rows():
    from omegaconf import OmegaConf

    spec = OmegaConf.load(files.option_path("experiment", "wisca"))
    params = spec.hydra.sweeper.params
    assert params["+arm"].split(",") == [f"wisca/{a}" for a in ARMS]
    assert str(params.seed) == "0,1,2"


@pytest.mark.parametrize("arm", ARMS)
def test_experiment_arms_compose(arm):
    cfg = compose_run_config(["experiment=wisca", f"+arm=wisca/{arm}"])
    assert cfg.model.name == "small" and cfg.trainer.max_steps == 300 and cfg.ablation.arm == arm
    node = cfg.techniques.get("wisca")
    if ARMS[arm] is None:
        assert node is None
    else:
        for key, value in ARMS[arm].items():
            assert node[key] == value, key
