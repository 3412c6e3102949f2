"""Analytic extra FLOPs of the PC layer, to compare a measured step-time overhead with the math.

PC recomputes every target's effective weight once per micro-batch forward (not per token):
for a matrix with long side L and short side S (level k >= 1),

    forward = 2 L S^2 (Gram)  +  2 (k - 1) S^3 (Horner products on the small side)  +  2 L S^2 (final)

and the backward costs about twice the forward, so 3x forward per micro-batch. sigma = u^T W v and the
elementwise scalings are O(L S) and left out. The power iteration adds `power_iters` x 2 mat-vec
products (4 L S FLOPs each pair) per target and per optimizer step, with no backward.

The baseline is the platform's analytic training cost of the matmuls, 6 (N_matmul + d_model V) per
token (`lit_modules.model.counting.flops_per_token`, attention ignored), which is also how papers.md
derives 3.4 % (271M, k=4), 14.5 % (1B, k=4, 32k tokens) and 10.7 % (1B, k=2); tests check these.
"""

from __future__ import annotations

from collections.abc import Sequence

from lit_modules.model.config import LlamaConfig
from lit_modules.model.counting import flops_per_token
from lit_modules.techniques.pc_layer.technique import DEFAULT_TARGETS
from lit_modules.techniques.pc_layer.polynomials import coefficients


def target_shapes(cfg: LlamaConfig, targets: Sequence[str] = DEFAULT_TARGETS) -> list[tuple[int, int]]:
    """(out, in) of every PC target matrix in the model (all layers)."""
    d, hd = cfg.d_model, cfg.head_dim
    q_dim, kv_dim = cfg.n_heads * hd, cfg.kv_heads * hd
    per_layer = {
        "q_proj": (q_dim, d),
        "k_proj": (kv_dim, d),
        "v_proj": (kv_dim, d),
        "o_proj": (d, q_dim),
        "gate_proj": (cfg.d_ff, d),
        "up_proj": (cfg.d_ff, d),
        "down_proj": (d, cfg.d_ff),
    }
    return [per_layer[t] for t in targets] * cfg.n_layers


def pc_forward_flops(out_features: int, in_features: int, level: int) -> int:
    """Forward FLOPs of building p(W / sigma) for one matrix (0 at level 0)."""
    k = len(coefficients(level)) - 1
    if k == 0:
        return 0
    long, short = max(out_features, in_features), min(out_features, in_features)
    return 4 * long * short * short + 2 * (k - 1) * short**3


def pc_step_flops(
    model_cfg: LlamaConfig,
    level: int,
    tokens_per_microbatch: int,
    targets: Sequence[str] = DEFAULT_TARGETS,
    power_iters: int = 10,
    accumulate_grad_batches: int = 1,
) -> dict[str, float]:
    """Extra FLOPs per optimizer step from PC, next to the baseline's, and their ratio.

    Keys: `pc_per_microbatch` (forward + backward of the polynomial), `power_iteration_per_step`,
    `pc_per_step` (both, for `accumulate_grad_batches` micro-batches), `baseline_per_step`
    (6 (N_matmul + d V) x tokens, attention excluded), `overhead` (= pc_per_step / baseline_per_step).
    """
    if model_cfg.vocab_size <= 0:
        raise ValueError("pc_step_flops needs model_cfg.vocab_size > 0 for the baseline's head FLOPs.")
    shapes = target_shapes(model_cfg, targets)
    per_micro = 3 * sum(pc_forward_flops(o, i, level) for o, i in shapes)
    power = power_iters * sum(4 * o * i for o, i in shapes)
    costs = flops_per_token(model_cfg, seq_len=1)
    baseline_per_token = costs["dense"] + costs["head"]
    baseline = baseline_per_token * tokens_per_microbatch * accumulate_grad_batches
    pc_total = per_micro * accumulate_grad_batches + power
    return {
        "pc_per_microbatch": float(per_micro),
        "power_iteration_per_step": float(power),
        "pc_per_step": float(pc_total),
        "baseline_per_step": float(baseline),
        "overhead": pc_total / baseline,
    }


__all__ = ["pc_forward_flops", "pc_step_flops", "target_shapes"]
