"""A dry run's memory estimate per device: weights + gradients + optimizer states + activations.

What it counts, and what it leaves out (so a reader knows how far to trust it):
- weights and gradients in fp32 (Lightning's mixed precision keeps fp32 master weights and grads);
- optimizer states: AdamW's two fp32 moments per parameter; Muon one momentum per hidden matrix
  (counted as one fp32 state for every parameter, which is close: AdamW holds the rest);
- activations kept for the backward pass of one micro-batch (`data.batch_size` sequences), per layer
  and token: the two norm inputs, q, k, v, the attention output, the MLP input, gate, up, their product
  (SwiGLU), in the compute precision's bytes; plus the fp32 logits and their gradient. Attention
  scores are not stored (PyTorch's scaled_dot_product_attention recomputes them);
- not counted: the CUDA context and allocator slack (often 0.5-2 GiB), torch.compile's buffers,
  techniques' extra tensors, and evaluation. FSDP would divide weights, grads and states by the devices.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from lit_modules.config.budget import Budget

GIB = 1024**3
HALF = ("bf16-mixed", "16-mixed", "bf16-true", "16-true")


@dataclass(frozen=True)
class MemoryEstimate:
    weights: float  # bytes
    grads: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations

    def describe(self) -> str:
        parts = ", ".join(f"{name} {value / GIB:.2f}" for name, value in (
            ("weights", self.weights), ("grads", self.grads), ("optimizer states", self.optimizer),
            ("activations", self.activations)))
        return f"~{self.total / GIB:.1f} GiB per device ({parts} GiB; no CUDA context or allocator slack)"


def estimate_memory(cfg: DictConfig, budget: Budget) -> MemoryEstimate:
    m = cfg.model
    params = budget.params_total
    states = 1 if cfg.optim.name == "muon" else 2
    act_bytes = 2 if cfg.trainer.precision in HALF else 4
    kv = (m.n_kv_heads or m.n_heads) * (m.d_model // m.n_heads)
    per_token_layer = 2 * m.d_model + m.d_model + 2 * kv + m.d_model + m.d_model + 3 * m.d_ff
    tokens = cfg.data.batch_size * cfg.data.seq_len
    vocab = m.vocab_size or 0
    activations = tokens * (m.n_layers * per_token_layer * act_bytes + 2 * 4 * vocab)
    return MemoryEstimate(weights=4.0 * params, grads=4.0 * params, optimizer=4.0 * states * params,
                          activations=float(activations))
