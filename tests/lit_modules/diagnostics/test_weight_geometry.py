"""Stable rank and condensation (row cosine similarity): known answers, and the registry on a real Llama."""

import math
from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrize

from lit_modules.diagnostics import REGISTRY, DiagnosticContext
from lit_modules.diagnostics.weight_geometry import (
    family_of,
    row_cosine_matrix,
    row_cosine_summary,
    stable_rank,
)
from lit_modules.model import InitConfig
from tests.helpers.models import small_llama

FAMILIES = ("q", "k", "v", "o", "attn_gate", "gate", "up", "down")


def gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# Gated attention, drawn from seed 0 by fan_in_power with gamma 1.
tiny_llama = partial(small_llama, init=InitConfig(rule="fan_in_power", gamma=1.0), d_ff=64,
                     attn_gate="elementwise")


def context(model: nn.Module, tmp_path: Path, step: int = 3) -> DiagnosticContext:
    tokens = torch.randint(0, 50, (2, 12), generator=gen(1))
    return DiagnosticContext(model=model, tokens=tokens, step=step, artifact_dir=tmp_path)


# --- stable rank ---------------------------------------------------------------------------------


def test_stable_rank_of_rank_one_matrix_is_one():
    u, v = torch.randn(40, 1, generator=gen(0)), torch.randn(1, 25, generator=gen(1))
    assert stable_rank(u @ v) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("n", [1, 7, 64])
def test_stable_rank_of_orthogonal_matrix_is_n(n):
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen(n), dtype=torch.float64))
    assert stable_rank(q) == pytest.approx(n, rel=1e-5)
    assert stable_rank(3.5 * q) == pytest.approx(n, rel=1e-5)  # scale-free


def test_stable_rank_known_values_and_paper_formula():
    assert stable_rank(torch.diag(torch.tensor([3.0, 4.0]))) == pytest.approx(25 / 16)
    assert stable_rank(torch.zeros(4, 3)) == 0.0
    w = torch.randn(20, 30, generator=gen(2))
    formula = torch.linalg.matrix_norm(w, "fro") ** 2 / torch.linalg.matrix_norm(w, 2) ** 2
    assert stable_rank(w) == pytest.approx(formula.item(), rel=1e-5)


# --- condensation --------------------------------------------------------------------------------


def test_identical_rows_are_fully_condensed():
    row = torch.randn(1, 16, generator=gen(3))
    scales = torch.tensor([[1.0], [2.0], [-0.5], [7.0], [-3.0]])  # |cos| ignores scale and sign
    w = scales * row
    mean_abs, share = row_cosine_summary(w)
    assert mean_abs == pytest.approx(1.0, abs=1e-6)
    assert share == 1.0
    torch.testing.assert_close(row_cosine_matrix(w).abs(), torch.ones(5, 5))


def test_orthogonal_rows_are_not_condensed():
    q, _ = torch.linalg.qr(torch.randn(32, 32, generator=gen(4)))
    mean_abs, share = row_cosine_summary(q)
    assert mean_abs == pytest.approx(0.0, abs=1e-6)
    assert share == 0.0


def test_condensation_known_mixture_and_chunking():
    # Rows e1, 2*e1, e2: ordered off-diagonal pairs = 6, of which 2 (rows 0 and 1) have |cos| = 1.
    w = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    assert row_cosine_summary(w) == pytest.approx((1 / 3, 1 / 3))
    big = torch.randn(50, 8, generator=gen(5))
    assert row_cosine_summary(big, chunk_rows=7) == pytest.approx(row_cosine_summary(big), rel=1e-6)
    c = row_cosine_matrix(big).abs()
    off = ~torch.eye(50, dtype=torch.bool)
    assert row_cosine_summary(big)[0] == pytest.approx(c[off].mean().item(), rel=1e-5)
    assert row_cosine_summary(big, threshold=0.5)[1] == pytest.approx((c[off] > 0.5).float().mean().item())


def test_zero_row_counts_as_cosine_zero_and_single_row_is_refused():
    w = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0]])
    assert row_cosine_summary(w) == pytest.approx((1 / 3, 1 / 3))
    with pytest.raises(ValueError, match="at least two rows"):
        row_cosine_summary(torch.ones(1, 4))


def test_family_names():
    assert family_of("layers.3.attn.q_proj") == "q"
    assert family_of("layers.3.attn.gate_proj") == "attn_gate"
    assert family_of("layers.3.mlp.gate_proj") == "gate"
    assert family_of("layers.0.mlp.down_proj") == "down"
    assert family_of("lm_head") == "head"
    assert family_of("layers.0.attn_norm") is None


# --- through the registry on a real model ---------------------------------------------------------


def test_stable_rank_diagnostic_on_tiny_llama(tmp_path):
    model = tiny_llama().eval()
    result = REGISTRY["stable_rank"](context(model, tmp_path))
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    for name in linears:
        assert f"stable_rank/{name}" in result.metrics
    for fam in FAMILIES + ("all",):
        assert f"stable_rank/mean/{fam}" in result.metrics
    assert "stable_rank/layers.1.attn.q_proj" in result.metrics and "stable_rank/lm_head" in result.metrics
    assert all(math.isfinite(v) and v >= 1.0 - 1e-5 for v in result.metrics.values())
    q_mean = sum(stable_rank(block.attn.q_proj.weight) for block in model.layers) / 2
    assert result.metrics["stable_rank/mean/q"] == pytest.approx(q_mean)


def test_condensation_diagnostic_on_tiny_llama_writes_heatmap(tmp_path):
    model = tiny_llama().eval()
    with torch.no_grad():  # condense one matrix by hand: every row the same direction
        rank_one = torch.randn(64, 1, generator=gen(6)) * torch.randn(1, 32, generator=gen(7))
        model.layers[0].mlp.up_proj.weight.copy_(rank_one)
    result = REGISTRY["condensation"](context(model, tmp_path))
    m = result.metrics
    assert m["condensation/mean_abs_cos/layers.0.mlp.up_proj"] == pytest.approx(1.0, abs=1e-5)
    assert m["condensation/share_gt_0.9/layers.0.mlp.up_proj"] == 1.0
    assert m["condensation/mean_abs_cos/layers.1.mlp.up_proj"] < 0.5  # random rows
    assert m["condensation/mean_abs_cos/mean/up"] == pytest.approx(
        (1.0 + m["condensation/mean_abs_cos/layers.1.mlp.up_proj"]) / 2, abs=1e-5
    )
    for fam in FAMILIES:
        assert f"condensation/share_gt_0.9/mean/{fam}" in m
    assert not any("lm_head" in k for k in m)  # head rows are vocabulary entries, left out
    assert all(math.isfinite(v) and 0.0 <= v <= 1.0 + 1e-6 for v in m.values())
    [png] = result.artifacts
    assert png.parent == tmp_path and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class RankOne(nn.Module):
    """A parametrization whose effective weight is rank one: the diagnostics must see it, not the raw one."""

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w[:, :1] @ w[:1, :]


def test_diagnostics_read_the_effective_weight_of_parametrized_layers(tmp_path):
    model = tiny_llama(attn_gate="none").eval()
    parametrize.register_parametrization(model.layers[0].attn.q_proj, "weight", RankOne())
    ctx = context(model, tmp_path)
    ranks = REGISTRY["stable_rank"](ctx).metrics
    assert ranks["stable_rank/layers.0.attn.q_proj"] == pytest.approx(1.0, rel=1e-4)
    assert ranks["stable_rank/layers.1.attn.q_proj"] > 2.0
    cos = REGISTRY["condensation"](ctx).metrics
    assert cos["condensation/mean_abs_cos/layers.0.attn.q_proj"] == pytest.approx(1.0, abs=1e-5)
    assert "stable_rank/mean/attn_gate" not in ranks  # no gate in this model, no empty family
