"""The meta-device build behind counts and shape checks: the same parameters and shapes as a real build,
torch.nn.init restored after it, and a config refused before torch._dynamo is ever imported."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from lit_modules.model import count_parameters
from lit_modules.model.meta import meta_llama
from tests.helpers.tiny_llama import build, make_cfg


@pytest.mark.parametrize("overrides", [{}, {"n_kv_heads": 2}, {"tie_embeddings": True}])
def test_a_meta_build_has_the_real_builds_parameters_shapes_and_rope_tables(overrides) -> None:
    real, meta = build(**overrides), meta_llama(make_cfg(**overrides))
    assert {k: v.shape for k, v in meta.state_dict().items()} == {k: v.shape for k, v in real.state_dict().items()}
    assert all(p.is_meta for p in meta.parameters())
    assert count_parameters(meta) == count_parameters(real)
    assert torch.equal(meta.rope_cos, real.rope_cos) and torch.equal(meta.rope_sin, real.rope_sin)


def test_init_fillers_are_restored_after_the_build_even_when_it_raises() -> None:
    before = {name: getattr(torch.nn.init, name) for name in ("normal_", "kaiming_uniform_", "ones_")}
    with pytest.raises(ValueError, match="vocab_size is 0"):
        meta_llama(make_cfg(vocab_size=0))
    meta_llama(make_cfg())
    assert {name: getattr(torch.nn.init, name) for name in before} == before
    assert torch.nn.init.normal_(torch.zeros(1000), std=1.0).std() > 0.5  # a real fill again


def test_a_validation_refusal_never_imports_torch_dynamo() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lit_modules.train", "optim.lr=-1"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "The learning rate must be positive." in done.stderr
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" in imported and "torch._dynamo" not in imported
