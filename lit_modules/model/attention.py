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

Hook points, where a technique acts inside attention without subclassing (`attn.add_hook(point, module)`;
a module's parameters train with the model and are saved with it):
- "pre_rope": `module(q, k) -> (q, k)` on the queries [B, H, T, hd] and keys [B, H_kv, T, hd] before RoPE
  (QK-norm, per-head scales);
- "scores": `module(scores) -> scores` on the scaled logits q k^T / sqrt(hd) [B, H, T, T] before the causal
  mask and the softmax (soft capping, temperature); a model with a scores hook computes attention explicitly,
  not with SDPA;
- "heads": `module(y) -> y` on each head's output [B, T, H, hd] before the output gate and `o_proj`.
With no hook added nothing extra runs and the module is what it was (no submodule, same state dict).
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import LlamaConfig
from .rope import apply_rope


HOOK_POINTS = ("pre_rope", "scores", "heads")


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

    def add_hook(self, point: str, module: nn.Module) -> None:
        """Run `module` at hook point `point` (HOOK_POINTS; the module docstring says what each receives)."""
        if point not in HOOK_POINTS:
            raise ValueError(f"unknown attention hook point {point!r} (known: {', '.join(HOOK_POINTS)})")
        if "hooks" not in self._modules:
            self.hooks = nn.ModuleDict({p: nn.ModuleList() for p in HOOK_POINTS})
        self.hooks[point].append(module)

    def _hooks(self, point: str) -> nn.ModuleList | tuple:
        hooks = self._modules.get("hooks")
        return hooks[point] if hooks is not None else ()

    def _qkv(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rotated q [B,H,T,hd] and k, v expanded to n_heads [B,H,T,hd]."""
        q = self._split_heads(self.q_proj(x), self.n_heads)
        k = self._split_heads(self.k_proj(x), self.n_kv_heads)
        for hook in self._hooks("pre_rope"):
            q, k = hook(q, k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
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
        if self._hooks("scores"):
            y = self._scores(q, k).softmax(dim=-1).to(v.dtype) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2)  # [B, T, H, hd]
        for hook in self._hooks("heads"):
            y = hook(y)
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
        q, k, _ = self._qkv(x, cos, sin)
        return self._scores(q.float(), k.float()).softmax(dim=-1)

    def _scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Causally masked attention logits [B, H, T, T], after the "scores" hooks."""
        T = q.shape[2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        for hook in self._hooks("scores"):
            scores = hook(scores)
        future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        return scores.masked_fill(future, float("-inf"))
