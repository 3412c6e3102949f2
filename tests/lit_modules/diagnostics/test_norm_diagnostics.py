"""Norm balance and RMSNorm input scale: known answers on constructed weights and embeddings."""

import math
from pathlib import Path

import pytest
import torch

from lit_modules.diagnostics import REGISTRY, DiagnosticContext
from lit_modules.diagnostics.norm_balance import l1_ratio
from tests.helpers.models import small_llama, token_batch


def context(model, tmp_path: Path) -> DiagnosticContext:
    return DiagnosticContext(model=model, tokens=token_batch(model, batch=2, length=8), step=0, artifact_dir=tmp_path)


def test_l1_ratio_known_answer():
    assert l1_ratio(torch.full((4, 4), -2.0), torch.ones(2, 4)) == pytest.approx(32 / 8)
    assert math.isnan(l1_ratio(torch.ones(2, 2), torch.zeros(2, 2)))


def test_norm_balance_reads_constant_weights(tmp_path):
    # GQA 4:2 at d=32: W_q is 32x32, W_k 16x32. All-ones q and k -> ratio 1024/512 = 2; v = 0.5, o = 1 -> 256/1024.
    model = small_llama()
    for layer in model.layers:
        layer.attn.q_proj.weight.data.fill_(1.0)
        layer.attn.k_proj.weight.data.fill_(1.0)
        layer.attn.v_proj.weight.data.fill_(0.5)
        layer.attn.o_proj.weight.data.fill_(1.0)
    metrics = REGISTRY["norm_balance"](context(model, tmp_path)).metrics
    assert metrics["norm_balance/layer0/qk_l1_ratio"] == pytest.approx(2.0)
    assert metrics["norm_balance/layer1/vo_l1_ratio"] == pytest.approx(256 / 1024)
    assert metrics["norm_balance/max_abs_log_ratio"] == pytest.approx(math.log(4))


def test_norm_balance_is_zero_when_every_pair_is_balanced(tmp_path):
    model = small_llama(n_kv_heads=4)  # MHA: equal shapes
    for layer in model.layers:
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            getattr(layer.attn, proj).weight.data.fill_(0.3)
    assert REGISTRY["norm_balance"](context(model, tmp_path)).metrics["norm_balance/max_abs_log_ratio"] == 0.0


def test_norm_inputs_sees_the_embedding_scale_at_the_first_norm(tmp_path):
    # Every embedding entry 0.01 and the attention/MLP outputs zeroed: each norm's input is the embedding,
    # so every mean square is 1e-4 exactly, and against eps 1e-5 the ratio is 10.
    model = small_llama(norm_eps=1e-5)
    model.tok_emb.weight.data.fill_(0.01)
    for layer in model.layers:
        layer.attn.o_proj.weight.data.zero_()
        layer.mlp.down_proj.weight.data.zero_()
    metrics = REGISTRY["norm_inputs"](context(model, tmp_path)).metrics
    squares = {k: v for k, v in metrics.items() if k.endswith("/mean_square")}
    assert len(squares) == 2 * 2 + 1  # attn_norm and mlp_norm per layer, and the final norm
    for value in squares.values():
        assert value == pytest.approx(1e-4, rel=1e-5)
    assert metrics["norm_inputs/eps"] == pytest.approx(1e-5)
    assert metrics["norm_inputs/min_over_eps"] == pytest.approx(10.0, rel=1e-5)
    assert model.training  # restored
