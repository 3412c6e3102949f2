"""Causal grouped-query self-attention with RoPE and an optional output gate.

Grouped-query attention: query head h reads key/value head h // n_rep with
n_rep = n_heads // n_kv_heads (the `repeat_interleave` order).

Output gate (gated attention, Qiu et al. 2025, variant "G1"): a bias-free
`gate_proj` maps the block's *normalized* input x to one logit per channel
("elementwise", D -> n_heads*hd) or per head ("headwise", D -> n_heads,
broadcast over hd); the SDPA output is multiplied by sigmoid(logit) per head
before `o_proj`. Unlike the reference code the gate is a separate Linear, not
fused into q_proj, so q_proj rows stay pure queries (simpler for WISCA).
With attn_gate == "none" no gate parameter exists and nothing extra runs.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import LlamaConfig
from .rope import apply_rope


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.n_kv_heads = cfg.kv_heads
        self.head_dim = cfg.head_dim
        self.n_rep = self.n_heads // self.n_kv_heads
        self.gate_kind = cfg.attn_gate
        d_model, hd = cfg.d_model, cfg.head_dim
        # Creation order q, k, v, o, then (optionally) gate: keeps the default
        # init of the ungated parameters identical with or without gating support.
        self.q_proj = nn.Linear(d_model, self.n_heads * hd, bias=False)
        self.k_proj = nn.Linear(d_model, self.n_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(d_model, self.n_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(self.n_heads * hd, d_model, bias=False)
        if self.gate_kind == "elementwise":
            self.gate_proj = nn.Linear(d_model, self.n_heads * hd, bias=False)
        elif self.gate_kind == "headwise":
            self.gate_proj = nn.Linear(d_model, self.n_heads, bias=False)
        elif self.gate_kind != "none":
            raise ValueError(f"unknown attn_gate {self.gate_kind!r}")

    def _split_heads(self, t: torch.Tensor, n: int) -> torch.Tensor:
        """[B, T, n*hd] -> [B, n, T, hd]."""
        B, T, _ = t.shape
        return t.view(B, T, n, self.head_dim).transpose(1, 2)

    def _qkv(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rotated q [B,H,T,hd] and k, v expanded to n_heads [B,H,T,hd]."""
        q = apply_rope(self._split_heads(self.q_proj(x), self.n_heads), cos, sin)
        k = apply_rope(self._split_heads(self.k_proj(x), self.n_kv_heads), cos, sin)
        v = self._split_heads(self.v_proj(x), self.n_kv_heads)
        if self.n_rep > 1:
            # Explicit expansion works on every SDPA backend (enable_gqa does not).
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = v.repeat_interleave(self.n_rep, dim=1)
        return q, k, v

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x: normalized block input [B, T, D]; cos/sin: [T, head_dim]."""
        B, T, _ = x.shape
        q, k, v = self._qkv(x, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2)  # [B, T, H, hd]
        if self.gate_kind != "none":
            gate = self.gate_proj(x).view(B, T, self.n_heads, -1)  # last dim hd or 1
            y = y * torch.sigmoid(gate)
        return self.o_proj(y.reshape(B, T, self.n_heads * self.head_dim))

    @torch.no_grad()
    def attention_probs(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        """Explicit causal softmax probabilities [B, n_heads, T, T] (float32).

        Diagnostic only (attention-sink measurement); SDPA never materializes
        these in training.
        """
        T = x.shape[1]
        q, k, _ = self._qkv(x, cos, sin)
        scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(self.head_dim)
        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        return scores.softmax(dim=-1)
