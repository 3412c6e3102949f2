"""Attention pseudo-rank: how many directions the per-head QK and OV maps really use.

"Weight Decay Improves Language Model Plasticity" (arXiv 2602.11137, papers.md section 5) reports that a
larger AdamW decay lowers the pseudo-rank of W_QK and of the value-projection product, following Kobayashi
et al. (arXiv 2410.23819: decay on W_Q, W_K acts as a nuclear-norm penalty on their product). The paper's
exact definition and threshold are UNCONFIRMED, so we log three spectra summaries at two thresholds.

Per layer and query head h (torch Linear convention, weight = [out, in]; hd = head_dim, D = d_model):
- W_Q^h = q_proj.weight[h*hd:(h+1)*hd]       [hd, D]
- W_K^h = k_proj.weight rows of kv head g = h // (n_heads // n_kv_heads)   (GQA: the kv head h reads)
- W_V^h = v_proj.weight rows of kv head g    [hd, D]
- W_O^h = o_proj.weight[:, h*hd:(h+1)*hd]    [D, hd]
- W_QK^h = W_Q^h^T W_K^h  [D, D]: the attention logit of query x_i and key x_j is x_i^T W_QK^h x_j / sqrt(hd)
  (RoPE is left out: it is a position-dependent rotation between the two factors, as in Kobayashi et al.).
- W_OV^h = W_O^h W_V^h    [D, D]: what head h writes into the residual stream per attended token. In the
  row-vector convention of papers (x W) this is (W_V^h)^T (W_O^h)^T, the transpose: same singular values.
Both products have rank <= hd. Their non-zero singular values come from an hd x hd matrix: with thin QR
factorizations A = Q_a R_a (A = W_Q^h^T) and B = Q_b R_b (B = W_K^h^T), A B^T = Q_a (R_a R_b^T) Q_b^T, and
Q_a, Q_b have orthonormal columns, so svdvals(A B^T) = svdvals(R_a R_b^T) plus D - hd zeros.

Summaries of one spectrum sigma_1 >= sigma_2 >= ... (an all-zero matrix gives 0 for each):
- pseudo-rank_tau = #{i : sigma_i >= tau * sigma_1}, for every tau in TAUS;
- entropy effective rank = exp(H(p)), p = sigma / sum(sigma) (Roy & Vetterli 2007; zeros add nothing);
- stable rank = sum(sigma^2) / sigma_1^2.
Each is averaged over heads and layers. Metrics (logged as `diag/<name>` by the diagnostics callback):
`attention_rank/<qk|ov>/pseudo_rank_tau<tau>`, `.../entropy_rank`, `.../stable_rank`, and
`attention_rank/head_dim` (the largest possible rank, to read the others against).
"""

from __future__ import annotations

from collections import defaultdict

import torch
from torch import nn

from lit_modules.diagnostics.registry import DiagnosticContext, DiagnosticResult, register

# Pseudo-rank thresholds relative to sigma_1; the paper's own value is UNCONFIRMED, so both are logged.
TAUS: tuple[float, ...] = (1e-2, 1e-3)


# --- pure math ------------------------------------------------------------------------------------


def product_singular_values(left: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
    """Singular values of left @ right^T for left, right of shape [D, r] with D >= r (descending, r of them).

    Computed in float64 on an r x r matrix (see the module docstring), never on the D x D product.
    """
    left, right = left.detach().double(), right.detach().double()
    if left.shape[0] < left.shape[1]:  # wide factors: the product itself is the small side
        return torch.linalg.svdvals(left @ right.T)
    _, r_left = torch.linalg.qr(left, mode="reduced")
    _, r_right = torch.linalg.qr(right, mode="reduced")
    return torch.linalg.svdvals(r_left @ r_right.T)


def pseudo_rank(singular: torch.Tensor, tau: float) -> int:
    """#{i : sigma_i >= tau * sigma_1}; 0 for an all-zero spectrum."""
    top = singular.max() if singular.numel() else singular.new_tensor(0.0)
    if not top > 0:
        return 0
    return int((singular >= tau * top).sum().item())


def entropy_rank(singular: torch.Tensor) -> float:
    """exp of the Shannon entropy of sigma / sum(sigma); k equal non-zero values give exactly k."""
    singular = singular.double().clamp_min(0.0)
    total = singular.sum()
    if not total > 0:
        return 0.0
    p = singular[singular > 0] / total
    return float(torch.exp(-(p * p.log()).sum()).item())


def stable_rank_of(singular: torch.Tensor) -> float:
    """sum(sigma^2) / sigma_1^2; 0 for an all-zero spectrum."""
    singular = singular.double()
    top = singular.max() if singular.numel() else singular.new_tensor(0.0)
    if not top > 0:
        return 0.0
    return float((singular.square().sum() / top.square()).item())


def spectrum_summary(singular: torch.Tensor, taus: tuple[float, ...] = TAUS) -> dict[str, float]:
    out = {f"pseudo_rank_tau{tau:g}": float(pseudo_rank(singular, tau)) for tau in taus}
    out["entropy_rank"] = entropy_rank(singular)
    out["stable_rank"] = stable_rank_of(singular)
    return out


# --- per-head factors -----------------------------------------------------------------------------


_ATTENTION_ATTRS = ("q_proj", "k_proj", "v_proj", "o_proj", "n_heads", "n_kv_heads", "head_dim")


def _is_attention(module: nn.Module) -> bool:
    return all(hasattr(module, a) for a in _ATTENTION_ATTRS)


def head_factors(attn: nn.Module) -> list[dict[str, tuple[torch.Tensor, torch.Tensor]]]:
    """Per query head: {"qk": (W_Q^h^T, W_K^h^T), "ov": (W_O^h, W_V^h^T)}, each factor [D, hd].

    The product of a pair (left @ right^T) is W_QK^h resp. W_OV^h. `module.weight` is read, so a
    parametrized layer (e.g. the PC layer) is measured by the weight it computes with.
    """
    hd, n_rep = attn.head_dim, attn.n_heads // attn.n_kv_heads
    wq, wk = attn.q_proj.weight.detach(), attn.k_proj.weight.detach()
    wv, wo = attn.v_proj.weight.detach(), attn.o_proj.weight.detach()
    heads = []
    for h in range(attn.n_heads):
        g = h // n_rep  # GQA: the kv head this query head reads (repeat_interleave order)
        q_rows, kv_rows = slice(h * hd, (h + 1) * hd), slice(g * hd, (g + 1) * hd)
        heads.append({
            "qk": (wq[q_rows].T, wk[kv_rows].T),
            "ov": (wo[:, q_rows], wv[kv_rows].T),
        })
    return heads


def attention_rank_metrics(model: nn.Module, taus: tuple[float, ...] = TAUS) -> dict[str, float]:
    """Spectrum summaries of W_QK^h and W_OV^h averaged over every head of every layer."""
    sums: dict[str, float] = defaultdict(float)
    count, head_dim = 0, 0
    for _, module in model.named_modules():
        if not _is_attention(module):
            continue
        head_dim = module.head_dim
        for factors in head_factors(module):
            count += 1
            for kind, (left, right) in factors.items():
                for key, value in spectrum_summary(product_singular_values(left, right), taus).items():
                    sums[f"attention_rank/{kind}/{key}"] += value
    if count == 0:
        return {}
    metrics = {key: total / count for key, total in sums.items()}
    metrics["attention_rank/head_dim"] = float(head_dim)
    return metrics


@register("attention_rank")
def attention_rank_diagnostic(ctx: DiagnosticContext) -> DiagnosticResult:
    return DiagnosticResult(metrics=attention_rank_metrics(ctx.model))
