"""init.stream: another draw of the initial weights with everything else kept (a null control's nuisance)."""

import pytest
import torch
from omegaconf import OmegaConf

from lit_modules.tracking import repro
from lit_modules.build import build_model
from lit_modules.config.composition import compose_run_config
from lit_modules.config.identity import identity_of
from lit_modules.config.validate import validate
from lit_modules.model.init_config import STREAM_STRIDE, InitConfig


def _cfg(*overrides):
    return validate(compose_run_config(["model.vocab_size=259", *overrides]))


def test_another_stream_draws_other_weights_and_stream_0_is_the_run_seed():
    base, same, other = (build_model(_cfg(*o), [])[0].state_dict() for o in ([], ["init.stream=0"], ["init.stream=1"]))
    assert all(torch.equal(base[k], same[k]) for k in base)
    moved = [k for k in base if not torch.equal(base[k], other[k])]
    assert "tok_emb.weight" in moved and "layers.0.attn.q_proj.weight" in moved
    assert all("norm" in k for k in base if k not in moved)  # norms start at 1 whatever the draw
    assert InitConfig(stream=2).generator_seed(7) == 7 + 2 * STREAM_STRIDE


def test_the_stream_leaves_the_data_order_and_the_recorded_hashes_alone():
    plain, other = _cfg(), _cfg("init.stream=1")
    assert OmegaConf.to_container(plain.data) == OmegaConf.to_container(other.data) and plain.seed == other.seed
    hash_of = lambda c: repro.config_hash(identity_of(OmegaConf.to_container(c, resolve=True)))  # noqa: E731
    assert "stream" not in identity_of(OmegaConf.to_container(plain, resolve=True))["init"]  # stream 0: as before
    assert hash_of(plain) != hash_of(other)


def test_a_negative_stream_is_refused():
    assert InitConfig(stream=-1).problems() == ["stream must be >= 0 (0 = the run seed's own draw), got -1."]
