"""The variants' presets (experiment=lora, wisca_lora, mols_lora, small_init_moe, wisca_moe): every arm
composes and validates to what its file says, each preset dry-runs, and one cell of each trains (slow)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validated
from lit_modules.train import run
from tests.helpers.runs import REPO, tiny_overrides

FINE_TUNES = ("lora", "wisca_lora", "mols_lora")  # start from a pre-trained base: init_from=<run id>
PRESETS = (*FINE_TUNES, "small_init_moe", "wisca_moe")
BASE = "0" * 32  # any run id: validation does not read it (the run does)


def arms(preset: str) -> list[str]:
    return str(OmegaConf.load(REPO / "conf/experiment" / f"{preset}.yaml").hydra.sweeper.params["+arm"]).split(",")


def cell(preset: str, arm: str, runs_dir, **extra: str) -> list[str]:
    words = [f"experiment={preset}", f"+arm={arm}", "seed=0", f"runs_dir={runs_dir}"]
    if preset in FINE_TUNES:
        words.append(f"init_from={extra.pop('init_from', BASE)}")
    return words + [f"{k}={v}" for k, v in extra.items()]


@pytest.mark.parametrize("preset", PRESETS)
def test_every_arm_composes_validates_and_dry_runs(preset, tmp_path):
    seen = []
    for arm in arms(preset):
        checked = validated(compose_run_config(cell(preset, arm, tmp_path)))
        cfg = checked.config
        assert (cfg.ablation.name, cfg.ablation.arm) == (preset, arm.split("/")[1])
        seen.append({t.name for t in checked.techniques})
    result = run(compose_run_config(cell(preset, arms(preset)[-1], tmp_path, dry_run="true")))
    assert result.status == "DRY_RUN" and result.budget.steps == cfg.trainer.max_steps
    assert not (tmp_path / "mlflow.db").exists()
    expected = {
        "lora": [set(), {"lora"}, {"lora"}, {"lora"}],
        "wisca_lora": [{"lora"}, {"lora", "wisca"}] * 3,
        "mols_lora": [{"lora"}, {"lora", "mols"}],
        "small_init_moe": [set(), set(), set()],
        "wisca_moe": [set(), {"wisca"}],
    }[preset]
    assert seen == expected


@pytest.mark.parametrize("preset", FINE_TUNES)
def test_the_adapter_arms_refuse_to_start_without_a_base(preset, tmp_path):
    words = [f"experiment={preset}", f"+arm={arms(preset)[-1]}", f"runs_dir={tmp_path}"]
    with pytest.raises(ConfigError, match="pass init_from=<run id or checkpoint>"):
        validated(compose_run_config(words))


def test_the_moe_presets_use_the_moe_model(tmp_path):
    for preset in ("small_init_moe", "wisca_moe"):
        cfg = validated(compose_run_config(cell(preset, arms(preset)[0], tmp_path))).config
        assert cfg.model.name == "tiny_moe" and cfg.model.n_experts == 4 and "expert_load" in cfg.diagnostics.names
    router0 = validated(compose_run_config(cell("small_init_moe", "small_init_moe/small_router0", tmp_path))).config
    assert (router0.init.gamma, router0.init.router_std) == (1.0, 0.0)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("presets") / "runs"
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=10)))
    return runs_dir, result.run_id


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
def test_one_cell_of_each_preset_trains(preset, base):
    runs_dir, base_id = base
    extra = {"init_from": base_id} if preset in FINE_TUNES else {}
    result = run(compose_run_config(cell(preset, arms(preset)[-1], runs_dir, **extra)))
    assert result.status == "FINISHED" and result.metrics["val/loss"] < 10
