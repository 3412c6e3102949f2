"""A dry run's memory estimate per device: weights + gradients + optimizer states + working copies + activations.

What it counts, and what it leaves out (so a reader knows how far to trust it). P = all parameters, W = devices:
- weights and gradients in fp32 (Lightning's mixed precision keeps fp32 master weights and grads; `*-true`
  half precision keeps them, and the optimizer states, in 2 bytes);
- optimizer states: AdamW's two moments per parameter; Muon one momentum per hidden matrix (counted as one
  state for every parameter, which is close: AdamW holds the rest);
- working copies, by layout:
  - one device: under bf16/fp16 autocast, the half copy of every matrix weight (blocks and head), cast once
    per forward and kept for the backward pass;
  - DDP: the same, plus the reducer's gradient buckets, a second fp32 copy of every gradient (torch's default
    gradient_as_bucket_view=False);
  - FSDP (full shard, one unit per block, lit_modules/distributed/strategy.py): weights, grads and states are
    divided by W; gathered at a time, in the compute precision, are the root unit (embedding, head, final
    norm) with its gradient, and two blocks' weights plus one block's gradient (FSDP prefetches the next);
- activations kept for the backward pass of one micro-batch (`data.batch_size` sequences), per layer and
  token: the two norm inputs, q, k, v, the attention output, the MLP input, gate, up, their product (SwiGLU),
  in the compute precision's bytes; plus the fp32 logits and their gradient. Attention scores are not stored
  (PyTorch's scaled_dot_product_attention recomputes them). With activation checkpointing
  (trainer.activation_checkpointing) each layer keeps only its input (the residual stream: fp32 under mixed
  precision) and one layer's activations exist at a time, while it is recomputed;
- not counted: the CUDA context and allocator slack (often 0.5-2 GiB), NCCL buffers, torch.compile's
  workspaces, techniques' extra tensors, and evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from lit_modules.config.budget import Budget, model_config, world_size
from lit_modules.model.counting import matmul_params_per_layer

GIB = 1024**3
HALF = ("bf16-mixed", "16-mixed", "bf16-true", "16-true")
HALF_TRUE = ("bf16-true", "16-true")
LAYOUTS = ("single", "ddp", "fsdp")


@dataclass(frozen=True)
class MemoryEstimate:
    weights: float  # bytes
    grads: float
    optimizer: float
    activations: float
    working: float = 0.0  # the layout's copies: autocast's half weights, DDP buckets, FSDP's gathered units

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.working + self.activations

    def describe(self) -> str:
        parts = ", ".join(f"{name} {value / GIB:.2f}" for name, value in (
            ("weights", self.weights), ("grads", self.grads), ("optimizer states", self.optimizer),
            *((("working copies", self.working),) if self.working else ()), ("activations", self.activations)))
        return f"~{self.total / GIB:.1f} GiB per device ({parts} GiB; no CUDA context or allocator slack)"


def layout_of(cfg: DictConfig) -> str:
    """How the configured run places its state: one device, DDP replicas, or FSDP shards."""
    if cfg.trainer.strategy == "fsdp":
        return "fsdp"
    return "ddp" if world_size(cfg) > 1 else "single"


def estimate_memory(cfg: DictConfig, budget: Budget, layout: str | None = None,
                    checkpointing: bool | None = None, batch_size: int | None = None) -> MemoryEstimate:
    """Per-device bytes of the run as configured, or under another layout / checkpointing / micro-batch."""
    layout = layout or layout_of(cfg)
    checkpointing = cfg.trainer.activation_checkpointing if checkpointing is None else checkpointing
    batch_size = batch_size or cfg.data.batch_size
    precision = cfg.trainer.precision
    params = budget.params_total
    states = 1 if cfg.optim.name == "muon" else 2
    state_bytes = 2 if precision in HALF_TRUE else 4
    compute_bytes = 2 if precision in HALF else 4
    weights, grads, optimizer = state_bytes * params, state_bytes * params, state_bytes * states * params
    working = _working_bytes(cfg, budget, layout, compute_bytes)
    if layout == "fsdp":
        shards = world_size(cfg)
        weights, grads, optimizer = weights / shards, grads / shards, optimizer / shards
    activations = _activation_bytes(cfg, batch_size * cfg.data.seq_len, checkpointing, compute_bytes)
    return MemoryEstimate(weights=float(weights), grads=float(grads), optimizer=float(optimizer),
                          activations=float(activations), working=float(working))


def _working_bytes(cfg: DictConfig, budget: Budget, layout: str, compute_bytes: int) -> float:
    m = cfg.model
    if layout == "fsdp":
        root = budget.params_total - budget.params_non_embedding  # embedding + head (norms: negligible)
        block = budget.params_non_embedding / m.n_layers
        return compute_bytes * (2 * root + 3 * block)
    autocast = cfg.trainer.precision in HALF and cfg.trainer.precision not in HALF_TRUE
    matrices = m.n_layers * matmul_params_per_layer(model_config(m)) + m.d_model * (m.vocab_size or 0)
    casts = 2 * matrices if autocast else 0
    buckets = 4 * budget.params_total if layout == "ddp" else 0
    return float(casts + buckets)


def _activation_bytes(cfg: DictConfig, tokens: int, checkpointing: bool, compute_bytes: int) -> float:
    m = cfg.model
    kv = (m.n_kv_heads or m.n_heads) * (m.d_model // m.n_heads)
    per_token_layer = 2 * m.d_model + m.d_model + 2 * kv + m.d_model + m.d_model + 3 * m.d_ff
    logits = 2 * 4 * (m.vocab_size or 0)
    if not checkpointing:
        return float(tokens * (m.n_layers * per_token_layer * compute_bytes + logits))
    residual_bytes = 2 if cfg.trainer.precision in HALF_TRUE else 4
    return float(tokens * (m.n_layers * m.d_model * residual_bytes + per_token_layer * compute_bytes + logits))
