"""WISCA's weight-scaling transition: balance the entrywise L1 norms of (W_q, W_k) and (W_v, W_o).

Pure tensor math on one attention module; no Lightning, no optimizer (see `opt_state.py`).
Every rescale is elementwise, W' = factor * W with `factor` a scalar (tensor level) or a per-row /
per-column vector (channel level), and the transition is a list of such `Rescale`s.

Tensor level (one scalar per pair and layer; exact for MHA, GQA and RoPE):
    a = sqrt(||W_k||_1 / ||W_q||_1);  W_q <- a W_q,  W_k <- W_k / a
    b = sqrt(||W_o||_1 / ||W_v||_1);  W_v <- b W_v,  W_o <- W_o / b
so afterwards ||W_q||_1 == ||W_k||_1 and ||W_v||_1 == ||W_o||_1, and Q K^T and (P V) W_o are unchanged.

Channel level (UNCONFIRMED in the paper; this is the only exact construction we know):
- QK: one scale a[g, c] per KV head g and head channel c. Row (g, c) of W_k is divided by a[g, c] and
  row (h, c) of W_q is multiplied by it for EVERY query head h of group g (h // n_rep == g), so each
  q.k product is unchanged. RoPE rotates channel c with its partner, so both channels of a pair share
  one scale; our RoPE is rotate-half, the partner of c is c + head_dim/2 (lit_modules/model/rope.py).
      a[g, pair] = sqrt( L1(W_k rows of the pair) / reduce_h L1(W_q rows of the pair, head h) )
  `reduce` is sum (default) or mean over the n_rep query heads of the group.
- VO: V is not rotated, so one scale t[g, c] per KV channel: row (g, c) of W_v times t[g, c], column
  (h, c) of W_o divided by t[g, c] for every h in group g.
      t[g, c] = sqrt( reduce_h L1(W_o column (h, c)) / L1(W_v row (g, c)) )
  An output gate multiplies the SDPA output per channel (or per head) before o_proj; a per-channel
  scale commutes with it, so the gate's own weights are never touched.
A pair with a zero norm on either side keeps scale 1 (nothing to balance).

Parametrized weights (the PC layer): the norms are those of the effective weights the model computes with,
and each factor is applied to the tensor that stores the weight (`scalable_weight.py`), which the caller
must have checked can carry it exactly (`scaled_projections` says which kind of factor each weight gets).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from lit_modules.techniques.scalable_weight import scalable_weight

GRANULARITIES = ("tensor", "channel")
CHANNEL_REDUCES = ("sum", "mean")


@dataclass(frozen=True)
class Rescale:
    """W' = factor * W for one weight; `factor` broadcasts against it (0-d, [rows, 1] or [1, cols]).

    `param` is the trainable tensor that stores the weight (for a parametrized Linear, its original)."""

    name: str
    param: nn.Parameter
    factor: torch.Tensor


def scaled_projections(pair: str, granularity: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """(projection, kind of factor) for the two weights a pair's rescale multiplies ("qk" or "vo")."""
    if pair == "qk":
        kind = "tensor" if granularity == "tensor" else "rows"
        return ("q_proj", kind), ("k_proj", kind)
    if granularity == "tensor":
        return ("v_proj", "tensor"), ("o_proj", "tensor")
    return ("v_proj", "rows"), ("o_proj", "columns")


def _stores(attn: nn.Module, pair: str, granularity: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The tensors that store the pair's two weights, where each factor is applied."""
    return tuple(scalable_weight(getattr(attn, proj), kind) for proj, kind in scaled_projections(pair, granularity))


@dataclass(frozen=True)
class AttentionShape:
    n_heads: int
    n_kv_heads: int
    head_dim: int

    @property
    def n_rep(self) -> int:
        return self.n_heads // self.n_kv_heads


def attention_shape(attn: nn.Module) -> AttentionShape:
    return AttentionShape(attn.n_heads, attn.n_kv_heads, attn.head_dim)


def l1(w: torch.Tensor) -> torch.Tensor:
    """Entrywise L1 norm (sum of |entries|), in float32."""
    return w.detach().float().abs().sum()


def balancing_scale(target: torch.Tensor, current: torch.Tensor) -> torch.Tensor:
    """sqrt(target / current) elementwise; 1 where either side is zero (nothing to balance)."""
    ok = (target > 0) & (current > 0)
    one = torch.ones_like(target)
    return torch.where(ok, target / torch.where(ok, current, one), one).sqrt()


def _reduce_heads(per_head_channel: torch.Tensor, shape: AttentionShape, reduce: str) -> torch.Tensor:
    """[n_heads * head_dim] -> [n_kv_heads, head_dim]: sum or mean over the query heads of each group."""
    grouped = per_head_channel.view(shape.n_kv_heads, shape.n_rep, shape.head_dim)
    return grouped.sum(dim=1) if reduce == "sum" else grouped.mean(dim=1)


def _pair_sum(x: torch.Tensor) -> torch.Tensor:
    """[G, head_dim] -> [G, head_dim/2]: channel j plus its rotate-half RoPE partner j + head_dim/2."""
    half = x.shape[-1] // 2
    return x[..., :half] + x[..., half:]


def _unpair(x: torch.Tensor) -> torch.Tensor:
    """[G, head_dim/2] -> [G, head_dim]: both channels of a RoPE pair get the pair's value."""
    return torch.cat([x, x], dim=-1)


def qk_channel_scales(
    wq: torch.Tensor, wk: torch.Tensor, shape: AttentionShape, reduce: str = "sum", rope_pairs: bool = True
) -> torch.Tensor:
    """Scale a[g, c] applied to the W_q rows of group g, channel c (W_k rows get 1/a), shape [G, head_dim].

    `rope_pairs=False` gives every channel its own scale; that is NOT output-preserving under RoPE and
    exists only so a test can show the pairing is necessary.
    """
    q_l1 = _reduce_heads(wq.detach().float().abs().sum(dim=1), shape, reduce)  # [G, hd]
    k_l1 = wk.detach().float().abs().sum(dim=1).view(shape.n_kv_heads, shape.head_dim)  # [G, hd]
    if not rope_pairs:
        return balancing_scale(k_l1, q_l1)
    return _unpair(balancing_scale(_pair_sum(k_l1), _pair_sum(q_l1)))


def vo_channel_scales(
    wv: torch.Tensor, wo: torch.Tensor, shape: AttentionShape, reduce: str = "sum"
) -> torch.Tensor:
    """Scale t[g, c] applied to the W_v rows (W_o columns of every head in group g get 1/t), [G, head_dim]."""
    v_l1 = wv.detach().float().abs().sum(dim=1).view(shape.n_kv_heads, shape.head_dim)
    o_l1 = _reduce_heads(wo.detach().float().abs().sum(dim=0), shape, reduce)
    return balancing_scale(o_l1, v_l1)


def _rows(per_kv_channel: torch.Tensor) -> torch.Tensor:
    """[G, hd] -> [G*hd, 1]: a factor for the rows of a KV-sized projection."""
    return per_kv_channel.reshape(-1, 1)


def _query_rows(per_kv_channel: torch.Tensor, shape: AttentionShape) -> torch.Tensor:
    """[G, hd] -> [H*hd, 1]: query head h takes the row of its KV head h // n_rep."""
    return per_kv_channel.repeat_interleave(shape.n_rep, dim=0).reshape(-1, 1)


def _query_columns(per_kv_channel: torch.Tensor, shape: AttentionShape) -> torch.Tensor:
    """[G, hd] -> [1, H*hd]: the o_proj column of head h, channel c takes entry (h // n_rep, c)."""
    return per_kv_channel.repeat_interleave(shape.n_rep, dim=0).reshape(1, -1)


def plan_qk(
    attn: nn.Module, granularity: str, reduce: str = "sum", rope_pairs: bool = True
) -> tuple[list[Rescale], dict[str, float]]:
    """Rescales for (W_q, W_k) and their stats: the L1 ratio before, and the scale(s) applied to W_q."""
    wq, wk = attn.q_proj.weight, attn.k_proj.weight
    sq, sk = _stores(attn, "qk", granularity)
    stats = {"qk_l1_ratio": (l1(wq) / l1(wk)).item()}
    if granularity == "tensor":
        a = balancing_scale(l1(wk), l1(wq))
        stats["qk_scale"] = a.item()
        return [Rescale("q_proj.weight", sq, a), Rescale("k_proj.weight", sk, 1.0 / a)], stats
    shape = attention_shape(attn)
    a = qk_channel_scales(wq, wk, shape, reduce, rope_pairs)
    stats.update(qk_scale_min=a.min().item(), qk_scale_max=a.max().item())
    return [
        Rescale("q_proj.weight", sq, _query_rows(a, shape)),
        Rescale("k_proj.weight", sk, _rows(1.0 / a)),
    ], stats


def plan_vo(attn: nn.Module, granularity: str, reduce: str = "sum") -> tuple[list[Rescale], dict[str, float]]:
    """Rescales for (W_v, W_o) and their stats: the L1 ratio before, and the scale(s) applied to W_v."""
    wv, wo = attn.v_proj.weight, attn.o_proj.weight
    sv, so = _stores(attn, "vo", granularity)
    stats = {"vo_l1_ratio": (l1(wv) / l1(wo)).item()}
    if granularity == "tensor":
        b = balancing_scale(l1(wo), l1(wv))
        stats["vo_scale"] = b.item()
        return [Rescale("v_proj.weight", sv, b), Rescale("o_proj.weight", so, 1.0 / b)], stats
    shape = attention_shape(attn)
    t = vo_channel_scales(wv, wo, shape, reduce)
    stats.update(vo_scale_min=t.min().item(), vo_scale_max=t.max().item())
    return [
        Rescale("v_proj.weight", sv, _rows(t)),
        Rescale("o_proj.weight", so, _query_columns(1.0 / t, shape)),
    ], stats


@torch.no_grad()
def apply_rescales(rescales: list[Rescale]) -> None:
    """W <- factor * W in place (the factor is cast to the weight's dtype and device)."""
    for r in rescales:
        r.param.mul_(r.factor.to(dtype=r.param.dtype, device=r.param.device))
