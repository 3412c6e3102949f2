"""The Llama-style decoder: embedding -> pre-norm blocks -> final norm -> head."""

from collections.abc import Mapping
from typing import Union

import torch
from torch import nn

from .attention import Attention
from .config import LlamaConfig
from .mlp import SwiGLU
from .moe import MoE
from .norm import RMSNorm
from .rope import precompute_rope


class Block(nn.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        if cfg.is_moe:
            self.mlp = MoE(cfg.d_model, cfg.expert_width, cfg.n_experts, cfg.experts_top_k, cfg.shared_expert,
                           cfg.moe_aux_coef, cfg.moe_aux_load)
        else:
            self.mlp = SwiGLU(cfg.d_model, cfg.d_ff)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    """Decoder-only LM. Weights keep PyTorch default init; see `init_weights`."""

    def __init__(self, cfg: Union[LlamaConfig, Mapping]) -> None:
        super().__init__()
        if not isinstance(cfg, LlamaConfig):
            cfg = LlamaConfig(**cfg)  # e.g. an OmegaConf DictConfig
        if cfg.vocab_size == 0:
            raise ValueError(
                "LlamaConfig.vocab_size is 0; set it from the tokenizer before building the model."
            )
        problems = cfg.problems()
        if problems:
            raise ValueError("invalid LlamaConfig:\n  " + "\n  ".join(problems))
        self.cfg = cfg

        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.final_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

        # Shared by all layers; derived from cfg, so not saved in checkpoints.
        cos, sin = precompute_rope(cfg.head_dim, cfg.max_seq_len, cfg.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def _check_length(self, T: int) -> None:
        if T > self.cfg.max_seq_len:
            raise ValueError(
                f"sequence length {T} exceeds max_seq_len {self.cfg.max_seq_len}"
            )

    def forward(
        self, idx: torch.Tensor, return_hidden: bool = False
    ) -> Union[torch.Tensor, tuple[torch.Tensor, list[torch.Tensor]]]:
        """idx [B, T] -> logits [B, T, V] (float32 unless run under autocast).

        With return_hidden=True also returns the residual stream after the
        embedding and after each block (n_layers + 1 tensors, before the final
        norm), for linear probes.
        """
        T = idx.shape[1]
        self._check_length(T)
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.tok_emb(idx)
        hidden = [x] if return_hidden else None
        for block in self.layers:
            x = block(x, cos, sin)
            if hidden is not None:
                hidden.append(x)
        logits = self.lm_head(self.final_norm(x))
        return (logits, hidden) if hidden is not None else logits

    def aux_losses(self) -> dict[str, torch.Tensor]:
        """Auxiliary training losses of the last forward (name -> scalar): the MoE load-balancing loss summed
        over layers; empty for the dense model. The LightningModule adds them to the objective."""
        if not self.cfg.is_moe or self.cfg.moe_aux_coef == 0:
            return {}
        losses = [block.mlp.aux_loss for block in self.layers if block.mlp.aux_loss is not None]
        return {"moe_aux": torch.stack(losses).sum()} if losses else {}

    @torch.no_grad()
    def attention_probs(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """Per-layer causal attention probabilities [B, n_heads, T, T] (diagnostic)."""
        T = idx.shape[1]
        self._check_length(T)
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        x = self.tok_emb(idx)
        probs = []
        for block in self.layers:
            probs.append(block.attn.attention_probs(block.attn_norm(x), cos, sin))
            x = block(x, cos, sin)
        return probs
