"""Parameter and FLOP accounting.

FLOP convention (Kaplan et al. / Chinchilla style, training = forward + backward):

    flops_per_token = 6 * (N_matmul + d_model * vocab_size)    # "dense" + "head"
                    + 12 * n_layers * n_heads * head_dim * seq_len   # "attention"

- N_matmul: weights of the block Linears (q, k, v, o, attention gate, SwiGLU
  gate/up/down). Norm weights and elementwise ops (RoPE, softmax, SiLU,
  sigmoid gate, residual adds) are not counted.
- Mixture of experts: N_matmul counts what one token is multiplied by, i.e. the ACTIVE weights: the router
  (d_model x n_experts), its top-k experts and the shared expert; the other experts' weights cost it
  nothing. Gathers, scatter-adds, softmax and top-k are not counted.

Parameter counts: `total`/`embedding`/`non_embedding` count every tensor (all experts); `active` and
`active_non_embedding` count what one token uses (the same numbers for a dense model). A token budget in
tokens per parameter (regime.tokens_per_param) multiplies the ACTIVE count of regime.param_count.
- The LM head matmul is counted (even when tied); the embedding lookup is not.
- Attention QK^T and PV each cost 2*T*hd FLOPs per query per head forward,
  x3 for forward+backward, with NO causal discount (what dense SDPA kernels
  and `FlopCounterMode` report; the useful work is about half).
"""

from torch import nn

from .config import LlamaConfig


def count_parameters(model: nn.Module) -> dict[str, int]:
    """total (unique tensors, tied counted once), embedding, non_embedding."""
    unique = {id(p): p for p in model.parameters()}
    total = sum(p.numel() for p in unique.values())
    embedding_ids = {id(model.tok_emb.weight), id(model.lm_head.weight)}
    embedding = sum(unique[i].numel() for i in embedding_ids if i in unique)
    idle = inactive_expert_params(model.cfg) if hasattr(model, "cfg") else 0
    return {"total": total, "embedding": embedding, "non_embedding": total - embedding,
            "active": total - idle, "active_non_embedding": total - embedding - idle}


def expert_params(cfg: LlamaConfig) -> int:
    """Weights of one SwiGLU expert."""
    return 3 * cfg.d_model * cfg.expert_width


def inactive_expert_params(cfg: LlamaConfig) -> int:
    """Expert weights a token does not use: (n_experts - top_k) experts in every layer."""
    return cfg.n_layers * (cfg.n_experts - cfg.experts_top_k) * expert_params(cfg) if cfg.is_moe else 0


def matmul_params_per_layer(cfg: LlamaConfig) -> int:
    """Weights in one block's Linears that a token is multiplied by (the active ones under MoE)."""
    d, hd = cfg.d_model, cfg.head_dim
    q_dim, kv_dim = cfg.n_heads * hd, cfg.kv_heads * hd
    attn = d * q_dim + 2 * d * kv_dim + q_dim * d
    gate = {"none": 0, "elementwise": d * q_dim, "headwise": d * cfg.n_heads}[cfg.attn_gate]
    if cfg.is_moe:
        active_experts = cfg.experts_top_k + int(cfg.shared_expert)
        return attn + gate + d * cfg.n_experts + active_experts * expert_params(cfg)
    mlp = 3 * d * cfg.d_ff
    return attn + gate + mlp


def flops_per_token(cfg: LlamaConfig, seq_len: int) -> dict[str, int]:
    """Analytic training FLOPs per token; see the module docstring."""
    if cfg.vocab_size <= 0:
        raise ValueError("flops_per_token needs cfg.vocab_size > 0")
    dense = 6 * cfg.n_layers * matmul_params_per_layer(cfg)
    head = 6 * cfg.d_model * cfg.vocab_size
    attention = 12 * cfg.n_layers * cfg.n_heads * cfg.head_dim * seq_len
    return {
        "dense": dense,
        "head": head,
        "attention": attention,
        "total": dense + head + attention,
    }
