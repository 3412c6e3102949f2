"""The FLOP yardsticks: a step's matmuls add up to the platform's analytic count, run with the layouts a
Linear uses, and the achieved / shape-rate / peak arithmetic on a known case (no time is asserted)."""

from __future__ import annotations

import pytest
import torch

from lit_modules.bench import flops as fl
from lit_modules.bench.steps import bench_config
from lit_modules.model.config import LlamaConfig
from lit_modules.model.counting import matmul_params_per_layer


@pytest.mark.parametrize("model", ["tiny", "tiny_x4", "small"])
def test_the_steps_matmuls_are_the_analytic_flops(model):
    cfg, batch, seq_len = fl.model_shapes(bench_config([f"model={model}"], 2))
    gemms = fl.step_gemms(cfg, batch, seq_len)
    assert sum(g.flops for g in gemms) == fl.analytic_step_flops(cfg, batch, seq_len)
    assert sum(i * o for _, i, o in fl.linears(cfg)) == matmul_params_per_layer(cfg)
    assert len(gemms) == cfg.n_layers * (3 * len(fl.linears(cfg)) + 6) + 3


def test_a_gated_gqa_model_counts_the_same():
    cfg = LlamaConfig(vocab_size=300, d_model=64, n_layers=3, n_heads=4, n_kv_heads=2, d_ff=160,
                      max_seq_len=64, attn_gate="headwise")
    gemms = fl.step_gemms(cfg, 3, 64)
    assert sum(g.flops for g in gemms) == fl.analytic_step_flops(cfg, 3, 64)


def test_tiny_shapes_by_hand():
    # tiny: d 64, d_ff 192, 2 layers, 4 heads of 16, vocab 259; the bench's micro-batch 16 x 128 = 2048 tokens.
    cfg, batch, seq_len = fl.model_shapes(bench_config(["model=tiny"], 2))
    gemms = {g.name: g for g in fl.step_gemms(cfg, batch, seq_len)}
    assert (gemms["layer0.q_proj.forward"].m, gemms["layer0.q_proj.forward"].k, gemms["layer0.q_proj.forward"].n) == (2048, 64, 64)
    assert (gemms["layer1.up_proj.grad_weight"].m, gemms["layer1.up_proj.grad_weight"].k) == (192, 2048)
    assert gemms["layer0.attention.qk"].batch == 64 and gemms["layer0.attention.qk"].flops == 2 * 64 * 128 * 16 * 128
    assert gemms["lm_head.forward"].n == cfg.vocab_size


def test_the_runner_multiplies_with_the_layouts_of_a_linear():
    gemms = [fl.Gemm("fwd", 5, 3, 4, trans_b=True), fl.Gemm("wgrad", 4, 6, 3, trans_a=True),
             fl.Gemm("bmm", 2, 3, 2, batch=2)]
    run = fl.gemm_runner(gemms, seed=1)
    run()
    (a, b, out), (wa, _, _), (ba, bb, bout) = run.operands
    assert b.shape == (3, 4) and b.stride() == (1, 3)  # a transposed view, as F.linear's weight
    assert wa.shape == (4, 6) and wa.stride() == (1, 4)  # dY^T, as the weight gradient reads it
    torch.testing.assert_close(out, a @ b)
    torch.testing.assert_close(bout, torch.bmm(ba, bb))
    assert fl.peak_gemms()[0].flops == 2 * 1024**3


def test_flop_rates_on_a_known_case():
    # A step of 1.9e9 analytic FLOPs in 40 ms: 47.5 GFLOP/s; its matmuls (1.9e9) alone take 25 ms: 76 GFLOP/s;
    # so the step runs at 62.5 % of what its shapes allow and 47.5 / 95 = 50 % of a 95 GFLOP/s peak.
    rates = fl.flop_rates(1.9e9, 0.040, 1.9e9, 0.025, peak_gflops=95.0)
    assert rates["achieved_gflops"] == pytest.approx(47.5)
    assert rates["shape_rate_gflops"] == pytest.approx(76.0)
    assert rates["shape_rate_fraction"] == pytest.approx(0.625)
    assert rates["peak_fraction"] == pytest.approx(0.5)
    assert rates["shape_rate_of_peak"] == pytest.approx(0.8)
