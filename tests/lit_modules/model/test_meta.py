"""The meta-device build behind counts and shape checks: the same parameters and shapes as a real build,
torch.nn.init restored after it, and a config refused before torch._dynamo is ever imported (before torch
itself when no technique is configured)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from lit_modules.model import count_parameters
from lit_modules.model.meta import meta_llama
from tests.helpers.runs import REPO
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


def _refused(*overrides: str) -> tuple[list[str], set[str]]:
    """The real entry point's stderr sentences (exit 2 asserted) and every module it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lit_modules.train", *overrides],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.splitlines()
    imported = {line.split("|")[-1].strip() for line in lines if line.startswith("import time:")}
    return [line for line in lines if not line.startswith("import time:")], imported


def test_a_validation_refusal_never_imports_torch_dynamo() -> None:
    # A configured technique is asked with the meta-device model, so torch loads here; its compiler must not.
    sentences, imported = _refused("z_loss=default", "optim.lr=-1")
    assert sentences == ["error: The learning rate must be positive."]
    assert "torch" in imported and "torch._dynamo" not in imported


@pytest.mark.parametrize("override, sentence", [
    ("optim.lr=-1", "The learning rate must be positive."),
    ("optim.weight_decay=-1", "optim.weight_decay must be >= 0, not -1.0."),
    ("schedule.warmup_fraction=2", "schedule.warmup_fraction must be in [0, 1)."),
    ("trainer.precision=bogus", "trainer.precision must be one of 32-true, 32, bf16-mixed, 16-mixed, bf16-true, "
                                "64-true, not 'bogus'."),
    ("data.seq_len=4096", "data.seq_len (4096) exceeds model.max_seq_len (256)."),
])
def test_a_plain_refusal_never_imports_torch(override: str, sentence: str) -> None:
    """With no technique configured, a value the plain checks refuse is its one sentence
    before torch (about 1.6 s of the first sentence's 2.7) is imported at all."""
    sentences, imported = _refused(override)
    assert sentences == [f"error: {sentence}"]
    assert "torch" not in imported
