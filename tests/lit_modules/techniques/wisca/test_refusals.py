"""WISCA refusals: QK-norm, biases and missing projections, bad knobs; every option validates on small."""

from __future__ import annotations

import pytest
import torch

from lit_modules.config import technique_context as context_module
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.model import Llama
from lit_modules.model.norm import RMSNorm
from lit_modules.techniques.wisca import Wisca
from lit_modules.techniques.wisca.technique import structure_problems
from tests.helpers.wisca import unbalanced_model


# ------------------------------------------------------------------ refusals


QK_NORM_SENTENCE = "not output-preserving with QK-norm"


def _with_qk_norm() -> Llama:
    model = unbalanced_model()
    model.layers[1].attn.q_norm = RMSNorm(model.cfg.head_dim)
    return model


def test_qk_norm_is_refused_for_qk_but_not_vo():
    model = _with_qk_norm()
    problems = structure_problems(model, qk=True)
    assert len(problems) == 1 and QK_NORM_SENTENCE in problems[0]
    assert structure_problems(model, qk=False) == []
    with pytest.raises(ValueError, match=QK_NORM_SENTENCE):
        Wisca(at_init=True).transform_model(model)
    Wisca(qk=False, at_init=True).transform_model(model)  # VO only stays exact


def test_problems_inspects_the_configured_model_without_building_it():
    cfg = compose_run_config(["model=small", "model.attn_gate=headwise"])  # vocab_size still 0 here
    model = context_module.meta_model(cfg)
    assert len(model.layers) == 5 and model.layers[0].attn.n_kv_heads == 2
    assert model.layers[0].attn.q_proj.weight.is_meta
    assert Wisca().problems(cfg) == []


def test_qk_norm_refused_by_problems(monkeypatch):
    monkeypatch.setattr(context_module, "meta_model", lambda cfg: _with_qk_norm())
    cfg = compose_run_config(["wisca=qk_vo_tensor"])
    assert any(QK_NORM_SENTENCE in p for p in Wisca().problems(cfg))
    assert Wisca(qk=False).problems(cfg) == []


def test_bias_and_missing_projection_refused():
    model = unbalanced_model()
    model.layers[0].attn.v_proj = torch.nn.Linear(64, 64, bias=True)
    assert "biases" in structure_problems(model, qk=True)[0]
    del model.layers[0].attn.o_proj
    assert "o_proj" in structure_problems(model, qk=True)[0]


def test_config_problems_are_reported_before_any_run():
    cfg = compose_run_config([
        "wisca=qk_vo_tensor", "techniques.wisca.qk=false", "techniques.wisca.vo=false",
        "techniques.wisca.opt_state=moments", "techniques.wisca.qk_granularity=row",
        "techniques.wisca.channel_reduce=max", "trainer.strategy=fsdp", "trainer.precision=bf16-true",
    ])
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    message = str(err.value)
    expected = ("rescales nothing", "techniques.wisca.opt_state must be one of",
                "techniques.wisca.qk_granularity must be one of",
                "techniques.wisca.channel_reduce must be one of", "FSDP shards them", "no fp32 master copy")
    for sentence in expected:
        assert sentence in message
    never = Wisca(every_n_steps=0, at_init=False).knob_problems()
    assert never == ["WISCA with techniques.wisca.every_n_steps=0 and at_init=false never runs; "
                     "enable one of them."]
    assert "every_n_steps must be >= 0" in Wisca(every_n_steps=-1).knob_problems()[0]


OPTIONS = ["qk_vo_tensor", "qk_tensor", "vo_tensor", "qk_channel_vo_tensor", "qk_vo_tensor_init"]


@pytest.mark.parametrize("option", OPTIONS)
def test_every_option_validates_on_small_and_records_its_choices(option):
    cfg = validate(compose_run_config(["model=small", f"wisca={option}"]))
    from hydra.utils import instantiate

    technique = instantiate(cfg.techniques.wisca)
    tags = technique.tags()
    assert tags["wisca.opt_state"] == "keep" and tags["fidelity.wisca.opt_state"] == "assumed"
    assert ("fidelity.wisca.channel_formula" in tags) == (option == "qk_channel_vo_tensor")
