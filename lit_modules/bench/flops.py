"""The physical limit as a row: this machine's single-thread SGEMM peak, the matmul rate at each model's own
training shapes, and the training step's achieved FLOP/s as a fraction of each.

- `gemm_peak_gflops`: 1024 x 1024 @ 1024 x 1024 float32 on one thread, thread CPU time.
- The step's matmuls (`step_gemms`): every matmul one training step of the model does, at its shapes and
  layouts: for each Linear (in -> out) over N = batch x seq tokens the forward x @ W^T (N x in @ in x out),
  the input gradient dY @ W and the weight gradient dY^T @ x; for attention QK^T and PV per head and their
  four backward products (dense, no causal discount); the LM head like a Linear. Their FLOPs add up to
  the platform's analytic count exactly (`lit_modules.model.counting.flops_per_token` x tokens; tested),
  so the **shape rate** (those FLOPs over the time those matmuls alone take, one after the other) is
  what the step could reach if it were nothing but its matmuls.
- `shape_rate_fraction_<model>`: achieved (analytic FLOPs per step / step time) over the shape rate,
  measured in interleaved blocks next to the real Lightning step; it is the share of the step's time
  that its matmuls need: 1 - it is the time spent elsewhere (norms, softmax, RoPE, SiLU, the loss,
  AdamW, Python), which `step_profile` names op by op. The attention kernel on CPU skips the masked half
  of QK^T that the count (and the dense yardstick) includes, so attention can look faster than matmul.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

import torch
from omegaconf import OmegaConf

from lit_modules.model.config import LlamaConfig
from lit_modules.model.counting import flops_per_token

GEMM_SIZE = 1024
FRACTION_GOAL = 0.90  # the issue: every row within 10 % of what its shapes allow


@dataclass(frozen=True)
class Gemm:
    """One (batched) matmul: batch x [m, k] @ [k, n]; `trans_a` / `trans_b`: the operand is a transposed view."""

    name: str
    m: int
    k: int
    n: int
    batch: int = 1
    trans_a: bool = False
    trans_b: bool = False

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n


def linears(cfg: LlamaConfig) -> list[tuple[str, int, int]]:
    """(name, in_features, out_features) of one block's Linears (dense models)."""
    if cfg.is_moe:
        raise ValueError("the step's matmuls are listed for dense models only")
    d, hd = cfg.d_model, cfg.head_dim
    q_dim, kv_dim = cfg.n_heads * hd, cfg.kv_heads * hd
    out = [("q_proj", d, q_dim), ("k_proj", d, kv_dim), ("v_proj", d, kv_dim), ("o_proj", q_dim, d)]
    if cfg.attn_gate != "none":
        out.append(("attn_gate", d, q_dim if cfg.attn_gate == "elementwise" else cfg.n_heads))
    return out + [("gate_proj", d, cfg.d_ff), ("up_proj", d, cfg.d_ff), ("down_proj", cfg.d_ff, d)]


def _linear(name: str, tokens: int, fan_in: int, fan_out: int) -> list[Gemm]:
    return [Gemm(f"{name}.forward", tokens, fan_in, fan_out, trans_b=True),  # x @ W^T, W stored [out, in]
            Gemm(f"{name}.grad_input", tokens, fan_out, fan_in),  # dY @ W
            Gemm(f"{name}.grad_weight", fan_out, tokens, fan_in, trans_a=True)]  # dY^T @ x


def step_gemms(cfg: LlamaConfig, batch: int, seq_len: int) -> list[Gemm]:
    """Every matmul of one training step (forward and backward) of a dense model."""
    tokens, heads, hd, t = batch * seq_len, batch * cfg.n_heads, cfg.head_dim, seq_len
    gemms: list[Gemm] = []
    for layer in range(cfg.n_layers):
        for name, fan_in, fan_out in linears(cfg):
            gemms += _linear(f"layer{layer}.{name}", tokens, fan_in, fan_out)
        a = f"layer{layer}.attention"
        gemms += [Gemm(f"{a}.qk", t, hd, t, heads, trans_b=True), Gemm(f"{a}.pv", t, t, hd, heads),
                  Gemm(f"{a}.grad_p", t, hd, t, heads, trans_b=True), Gemm(f"{a}.grad_v", t, t, hd, heads, trans_a=True),
                  Gemm(f"{a}.grad_q", t, t, hd, heads), Gemm(f"{a}.grad_k", t, t, hd, heads, trans_a=True)]
    return gemms + _linear("lm_head", tokens, cfg.d_model, cfg.vocab_size)


def analytic_step_flops(cfg: LlamaConfig, batch: int, seq_len: int) -> float:
    """The platform's analytic training FLOPs of one step (what the achieved FLOP/s is counted with)."""
    return float(flops_per_token(cfg, seq_len)["total"]) * batch * seq_len


def model_shapes(config) -> tuple[LlamaConfig, int, int]:
    """(model config, micro-batch, seq_len) of a composed run config."""
    return OmegaConf.to_object(config.model), int(config.data.batch_size), int(config.data.seq_len)


def gemm_runner(gemms: list[Gemm], seed: int = 0):
    """A function that runs `gemms` once each, one after the other, on preallocated float32 operands."""
    generator = torch.Generator().manual_seed(seed)
    work = []
    for g in gemms:
        a = torch.randn(g.batch, g.k, g.m, generator=generator).transpose(1, 2) if g.trans_a \
            else torch.randn(g.batch, g.m, g.k, generator=generator)
        b = torch.randn(g.batch, g.n, g.k, generator=generator).transpose(1, 2) if g.trans_b \
            else torch.randn(g.batch, g.k, g.n, generator=generator)
        out = torch.empty(g.batch, g.m, g.n)
        work.append((a[0], b[0], out[0]) if g.batch == 1 else (a, b, out))

    def run() -> None:
        with torch.no_grad():
            for a, b, out in work:
                (torch.mm if a.dim() == 2 else torch.bmm)(a, b, out=out)

    run.operands = work  # (a, b, out) of each matmul, for the tests
    return run


def peak_gemms(size: int = GEMM_SIZE, count: int = 2) -> list[Gemm]:
    return [Gemm(f"peak{i}", size, size, size) for i in range(count)]


def flop_rates(analytic_flops: float, step_seconds: float, gemm_flops: float, gemm_seconds: float,
               peak_gflops: float | None = None) -> dict:
    """Achieved GFLOP/s of a step (analytic FLOPs over its time), the shape rate (its matmuls' FLOPs over
    their time) and the achieved rate as a fraction of that and of the SGEMM peak."""
    achieved = analytic_flops / step_seconds / 1e9
    shape_rate = gemm_flops / gemm_seconds / 1e9
    out = {"achieved_gflops": achieved, "shape_rate_gflops": shape_rate, "shape_rate_fraction": achieved / shape_rate}
    if peak_gflops:
        out["peak_fraction"] = achieved / peak_gflops
        out["shape_rate_of_peak"] = shape_rate / peak_gflops
    return out


GEMM_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")


def step_profile(overrides: list[str], steps: int = 4, warmup: int = 3, top: int = 6) -> dict:
    """Where a training step's time goes, op by op: self CPU time shares over `steps` plain-loop steps
    (the same math as the Lightning step) under torch.profiler; `gemm_share` is the matmuls' share."""
    from torch.profiler import ProfilerActivity, profile

    from lit_modules.bench.steps import plain_seconds_per_step

    profiler = profile(activities=[ProfilerActivity.CPU])

    def on_step(step: int) -> None:
        if step in (warmup, warmup + steps):
            with _stderr_silenced():  # the profiler's C++ side prints its start and stop there
                profiler.start() if step == warmup else profiler.stop()

    plain_seconds_per_step(overrides, warmup + steps + 1, warmup=0, on_step=on_step)
    events = [(e.key, e.self_cpu_time_total) for e in profiler.key_averages()]
    total = sum(t for _, t in events) or 1.0
    gemm = sum(t for k, t in events if k in GEMM_OPS)
    others = sorted(((k, t) for k, t in events if k not in GEMM_OPS), key=lambda kt: -kt[1])[:top]
    return {"gemm_share": gemm / total, "top_other_ops": {k: t / total for k, t in others}}


@contextlib.contextmanager
def _stderr_silenced():
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
