"""MoLS configs: the Hydra options, the experiment preset and its arms, the manual-LR sweep space,
and the refusals (Muon without an AdamW-managed group, an estimate after warmup, bad knobs)."""


import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.techniques.mols import MoLS
from lit_modules.config.composition import compose_run_config
from sweeps.space import as_overrides
from sweeps.sweep_config import load_sweep_config
from tests.helpers.runs import REPO

SHORT = ["regime=steps", "trainer.max_steps=200", "schedule.warmup_fraction=0.1"]


def technique(overrides: list[str]) -> MoLS:
    cfg = compose_run_config(overrides)
    return instantiate(cfg.techniques.mols)


def test_snr_option_builds_with_warmup_wired_from_the_schedule():
    t = technique([*SHORT, "mols=snr"])
    s = t.settings
    assert s.mode == "snr" and s.base_group == "vo" and s.estimator == "per_coord" and s.ramp == "linear"
    assert s.warmup_fraction == 0.1 and s.warmup_steps is None
    validate(compose_run_config([*SHORT, "mols=snr"]))


def test_manual_scales_are_overridable_per_group():
    t = technique(
        [
            *SHORT,
            "mols=manual",
            "techniques.mols.manual_scales.qk=2.5",
            "techniques.mols.manual_scales.head=0.5",
        ]
    )
    assert t.settings.mode == "manual"
    assert t.manual_scales() == {"emb": 1.0, "qk": 2.5, "vo": 1.0, "mlp": 1.0, "head": 0.5}
    assert set(t.callback().alpha) == {"emb", "qk", "vo", "mlp", "head"}


def test_sweep_space_keys_reach_the_technique():
    sweep, specs = load_sweep_config("mols_manual_lr", [])
    sampled = {spec.key: 0.5 + i for i, spec in enumerate(specs)}
    cfg = compose_run_config([*sweep.overrides, *as_overrides(sampled)])
    validate(cfg)
    t = instantiate(cfg.techniques.mols)
    for key, value in sampled.items():
        assert t.manual_scales()[key.rsplit(".", 1)[1]] == value
    assert cfg.schedule.warmup_fraction == 0.1 and cfg.model.name == "small"


@pytest.mark.parametrize("arm,techniques", [("mols/baseline", {}), ("mols/snr", {"mols"})])
def test_experiment_preset_and_arms_compose(arm, techniques):
    cfg = compose_run_config(["experiment=mols", f"+arm={arm}", "seed=2"])
    validate(cfg)
    assert cfg.model.name == "small" and cfg.schedule.warmup_fraction == 0.1 and cfg.seed == 2
    assert {k for k, v in cfg.techniques.items() if v is not None} == set(techniques)
    assert cfg.ablation.name == "mols" and cfg.ablation.arm == arm.split("/")[1]
    raw = OmegaConf.load(REPO / "conf/experiment/mols.yaml")
    assert (
        raw.hydra.sweeper.params["+arm"] == "mols/baseline,mols/snr"
        and raw.hydra.sweeper.params.seed == "0,1,2"
    )


def problems(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as err:
        validate(compose_run_config(overrides))
    return str(err.value)


MUON_REFUSAL = (
    "Under optim=muon MoLS scales only AdamW-managed groups (emb, head, norm), and none of its groups "
    "(qk, vo, mlp) is one; add emb or head to techniques.mols.modules or use optim=adamw."
)


def test_muon_without_adam_managed_groups_is_refused_in_one_sentence():
    text = problems([*SHORT, "optim=muon", "mols=snr", "techniques.mols.modules=[qk,vo,mlp]"])
    assert text == MUON_REFUSAL


def test_muon_with_the_default_modules_is_accepted():
    validate(compose_run_config([*SHORT, "optim=muon", "mols=snr"]))


def test_estimate_after_warmup_is_refused():
    text = problems(["regime=steps", "trainer.max_steps=200", "schedule.warmup_fraction=0.01", "mols=snr"])
    assert "MoLS must estimate before warmup ends" in text and "step 2" in text
    text = problems([*SHORT, "mols=snr", "techniques.mols.estimate_step=20"])
    assert "estimate at step 20 and warmup ends at step 20" in text


@pytest.mark.parametrize(
    "override,fragment",
    [
        ("techniques.mols.estimator=median", "techniques.mols.estimator must be one of"),
        ("techniques.mols.ramp=exp", "techniques.mols.ramp must be one of"),
        ("techniques.mols.extra_micro_batches=1", "at least 2"),
        ("techniques.mols.base_group=norm", "base_group 'norm' is not one of the scaled groups"),
        ("techniques.mols.clip_min=0", "clip_min must be positive"),
        ("techniques.mols.modules=[emb,ffn]", "Unknown techniques.mols.modules ffn"),
    ],
)
def test_bad_knobs_are_refused(override, fragment):
    assert fragment in problems([*SHORT, "mols=snr", override])


def test_base_group_absent_from_model_is_refused():
    assert "has no parameters in this model" in problems(
        [*SHORT, "mols=snr", "model.tie_embeddings=true", "techniques.mols.base_group=head"]
    )


def test_manual_scales_must_be_positive():
    assert "manual_scales.qk must be a positive number" in problems(
        [*SHORT, "mols=manual", "techniques.mols.manual_scales.qk=0"]
    )


def test_tags_mark_unconfirmed_knobs_as_assumed():
    tags = technique([*SHORT, "mols=snr"]).tags()
    for knob in ("estimator", "base_group", "extra_micro_batches", "ramp", "norm_policy", "clip"):
        assert tags[f"fidelity.mols.{knob}"] == "assumed"
    assert tags["mols.estimator"] == "per_coord" and tags["mols.base_group"] == "vo"
    assert tags["mols.extra_micro_batches"] == "8" and tags["mols.ramp"] == "linear"
    assert tags["mols.norm_policy"] == "exclude" and tags["fidelity.mols.groups"] == "secondary"
