"""Spectral diagnostics: the modified condition number, GMCN groups (post-PC, gamma excluded), histograms."""

import math

import pytest
import torch
from torch import nn

from lit_modules.diagnostics import REGISTRY, DiagnosticContext
from lit_modules.diagnostics.spectral import (
    block_matrices,
    bottom_count,
    geometric_mean,
    gmcn_metrics,
    modified_condition_number,
)
from lit_modules.techniques.pc_layer.parametrization import attach_pc, pc_of
from lit_modules.techniques.pc_layer.polynomials import odd_polynomial


def _with_spectrum(s, rows, cols, seed=0):
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, len(s), generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, len(s), generator=g, dtype=torch.float64))
    return (u @ torch.diag(torch.as_tensor(s, dtype=torch.float64)) @ v.T).float()


def test_bottom_count_is_ceil_of_ten_percent():
    assert [bottom_count(n) for n in (1, 7, 10, 11, 20, 30, 128, 1024)] == [1, 1, 1, 2, 2, 3, 13, 103]


def test_modified_condition_number_known_answers():
    # 20 values 1..20: bottom ceil(2) = {1, 2} -> 20 / 1.5.
    assert modified_condition_number(torch.arange(1.0, 21.0)) == pytest.approx(20 / 1.5)
    # 10 values: bottom 1 -> sigma_1 / sigma_min (the ordinary condition number); order does not matter.
    assert modified_condition_number(
        torch.tensor([2.0, 8.0, 3.0, 5.0, 4.0, 6.0, 7.0, 2.5, 3.5, 4.5])
    ) == pytest.approx(4.0)
    assert math.isnan(modified_condition_number(torch.tensor([1.0, 0.0])))


def test_geometric_mean_skips_invalid_values():
    assert geometric_mean([4.0, 9.0]) == pytest.approx(6.0)
    assert geometric_mean([4.0, float("nan"), 9.0]) == pytest.approx(6.0)
    assert math.isnan(geometric_mean([]))


class _Block(nn.Module):
    """Just the seven GMCN matrices of one layer, with chosen spectra."""

    def __init__(self, spectra):
        super().__init__()
        self.attn = nn.Module()
        self.mlp = nn.Module()
        for path, s in spectra.items():
            parent, name = path.split(".")
            n = len(s)
            linear = nn.Linear(n, n + 4, bias=False)
            with torch.no_grad():
                linear.weight.copy_(_with_spectrum(s, n + 4, n, seed=len(path)))
            setattr(getattr(self, parent), name, linear)


def _seven():
    # Each matrix has 10 singular values, so its MCN is sigma_max / sigma_min.
    spectra = {}
    for i, path in enumerate(
        [
            "attn.q_proj",
            "attn.k_proj",
            "attn.v_proj",
            "attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        ]
    ):
        kappa = 2.0 ** (i + 1)  # 2, 4, ..., 128
        spectra[path] = torch.linspace(1.0, 1.0 / kappa, 10).tolist()
    model = nn.Module()
    model.layers = nn.ModuleList([_Block(spectra)])
    return model


def test_gmcn_is_the_geometric_mean_over_matrices():
    metrics = gmcn_metrics(_seven())
    # geometric mean of 2^1 .. 2^7 = 2^4
    assert metrics["gmcn/all"] == pytest.approx(16.0, rel=1e-4)
    # No PC layer: the split follows the PC layer's default targets, o/gate/up/down (2^4..2^7) vs q/k/v.
    assert metrics["gmcn/pc"] == pytest.approx(2.0**5.5, rel=1e-4)
    assert metrics["gmcn/no_pc"] == pytest.approx(2.0**2, rel=1e-4)
    assert metrics["gmcn/kind/q"] == pytest.approx(2.0, rel=1e-4)
    assert metrics["gmcn/kind/down"] == pytest.approx(128.0, rel=1e-4)


def test_gmcn_uses_the_post_pc_spectrum_without_gamma():
    model = _seven()
    up = model.layers[0].mlp.up_proj
    pc = attach_pc(up, "layers.0.mlp.up_proj", level=4)
    pc.refresh(up.parametrizations.weight.original, 300)  # sigma = 1 exactly (up to eps)
    with torch.no_grad():
        pc.gamma.fill_(-3.0)  # gamma must not matter (GMCN excludes it and is scale-invariant)
    metrics = gmcn_metrics(model)
    s = torch.linspace(1.0, 1.0 / 64, 10, dtype=torch.float64)
    post = odd_polynomial(s, 4)
    expected_up = (post.max() / post.min()).item()  # p is increasing here, so p(s_min) is the smallest
    assert metrics["gmcn/pc"] == pytest.approx(expected_up, rel=1e-4)
    assert expected_up < 64 / 3  # PC level 4 conditions the matrix
    others = [2.0, 4.0, 8.0, 16.0, 32.0, 128.0]
    assert metrics["gmcn/no_pc"] == pytest.approx(math.exp(sum(map(math.log, others)) / 6), rel=1e-4)
    assert metrics["gmcn/all"] == pytest.approx(
        math.exp((sum(map(math.log, others)) + math.log(expected_up)) / 7), rel=1e-4
    )
    # The accessor: with gamma the weight is gamma times the post-PC one.
    kind, with_gamma, is_pc = block_matrices(model, with_gamma=True)["layers.0.mlp.up_proj"]
    _, without, _ = block_matrices(model, with_gamma=False)["layers.0.mlp.up_proj"]
    assert kind == "up" and is_pc
    torch.testing.assert_close(with_gamma, -3.0 * without)
    assert pc_of(up) is pc


def test_registered_diagnostics_run(tmp_path):
    assert {"gmcn", "sv_hist"} <= set(REGISTRY)
    model = _seven()
    attach_pc(model.layers[0].mlp.down_proj, "layers.0.mlp.down_proj", level=2)
    ctx = DiagnosticContext(
        model=model, tokens=torch.zeros(1, 4, dtype=torch.long), step=7, artifact_dir=tmp_path
    )
    with torch.no_grad():
        result = REGISTRY["gmcn"](ctx)
        hist = REGISTRY["sv_hist"](ctx)
    assert {"gmcn/all", "gmcn/pc", "gmcn/no_pc"} <= set(result.metrics)
    assert len(hist.artifacts) == 1 and hist.artifacts[0].suffix == ".png"
    assert hist.artifacts[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_default_pc_kinds_match_the_technique_defaults():
    from lit_modules.diagnostics.spectral import DEFAULT_PC_KINDS, GMCN_KINDS
    from lit_modules.techniques.pc_layer.technique import DEFAULT_TARGETS, TARGET_PATHS

    assert sorted(GMCN_KINDS[TARGET_PATHS[t]] for t in DEFAULT_TARGETS) == sorted(DEFAULT_PC_KINDS)
