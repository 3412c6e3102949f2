"""A LoRA adapter as a weight parametrization: W_eff = W + scaling * B @ A, with W frozen.

    attach(linear, rank=8, alpha=16, variant="lora", generator=g)   # adapts linear.weight in place
    merge(model)                                                      # plain nn.Linear weights again

The adapter is a `torch.nn.utils.parametrize` step on `weight`, so the module stays an `nn.Linear` (its
forward, the FLOP count, WISCA's and the diagnostics' view of `q_proj.weight` are unchanged) and merging is
`remove_parametrizations(leave_parametrized=True)`: the merged weight is the very tensor the adapted forward
computed, so merged logits equal the unmerged ones. The frozen base is the parametrization's `original`; the
factors are `...parametrizations.weight.0.lora_A` [r, d_in] and `...lora_B` [d_out, r] (the `.lora_` in their
names makes them their own optimizer family, lit_modules/optim/param_groups.py).

Variants (scaling and initialization):
- lora   (Hu et al. 2021):        scaling = alpha / r; A ~ U(-1/sqrt(d_in), 1/sqrt(d_in)) (PEFT's kaiming-uniform
                                  with a = sqrt(5)), B = 0, so the function is unchanged at step 0.
- rslora (Kalajdzievski 2023):    scaling = alpha / sqrt(r); same initialization.
- pissa  (Meng et al. 2024):      scaling = alpha / r; with W = U S V^T, A = sqrt(S_r / scaling) V_r^T and
                                  B = U_r sqrt(S_r / scaling) (PEFT's split), and the frozen base becomes the
                                  residual W - scaling * B @ A (computed in float64), so W_eff = W at step 0 up
                                  to float32 rounding of the residual.
No dropout on the adapter input (PiSSA uses none; a dropout would make the merged model differ in training).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

VARIANTS = ("lora", "rslora", "pissa")


def scaling_of(variant: str, rank: int, alpha: float) -> float:
    return alpha / math.sqrt(rank) if variant == "rslora" else alpha / rank


class LowRankDelta(nn.Module):
    """weight -> weight + scaling * lora_B @ lora_A (a parametrization of one Linear's weight)."""

    def __init__(self, out_features: int, in_features: int, rank: int, scaling: float, like: torch.Tensor):
        super().__init__()
        self.scaling = float(scaling)
        self.lora_A = nn.Parameter(torch.zeros(rank, in_features, dtype=like.dtype, device=like.device))
        self.lora_B = nn.Parameter(torch.zeros(out_features, rank, dtype=like.dtype, device=like.device))

    @property
    def rank(self) -> int:
        return self.lora_A.shape[0]

    def delta(self) -> torch.Tensor:
        return self.scaling * (self.lora_B @ self.lora_A)

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return weight + self.delta()

    def scaling_problem(self, kind: str) -> str:
        """A factor on the frozen base (what WISCA's attention pairs would scale) leaves B @ A unscaled."""
        return "its LoRA adapter adds scaling x B @ A, which a factor on the frozen base weight does not scale"


def adapter_of(linear: nn.Module) -> LowRankDelta | None:
    if not parametrize.is_parametrized(linear, "weight"):
        return None
    return next((p for p in linear.parametrizations.weight if isinstance(p, LowRankDelta)), None)


def adapters(model: nn.Module) -> list[tuple[str, LowRankDelta]]:
    """(module path, adapter) for every adapted Linear of `model`, in module order."""
    return [(name, a) for name, m in model.named_modules() if (a := adapter_of(m)) is not None]


@torch.no_grad()
def attach(linear: nn.Linear, rank: int, alpha: float, variant: str, generator: torch.Generator | None = None) -> LowRankDelta:
    """Adapt `linear.weight` (frozen from now on) with a rank-`rank` adapter of `variant`."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, not {variant!r}")
    weight = linear.weight
    out_features, in_features = weight.shape
    delta = LowRankDelta(out_features, in_features, rank, scaling_of(variant, rank, alpha), weight)
    if not weight.is_meta:  # a meta-device model (validation) needs the shapes only
        if variant == "pissa":
            residual = _pissa_split(weight, delta)
            weight.copy_(residual)
        else:
            bound = 1.0 / math.sqrt(in_features)
            sample = torch.rand(delta.lora_A.shape, generator=generator, device=generator.device if generator else None)
            delta.lora_A.copy_((sample * 2 - 1) * bound)
    weight.requires_grad_(False)
    parametrize.register_parametrization(linear, "weight", delta, unsafe=True)
    linear.parametrizations.weight.original.requires_grad_(False)
    return delta


def _pissa_split(weight: torch.Tensor, delta: LowRankDelta) -> torch.Tensor:
    """Fill A, B from the top singular triplets; return the frozen residual W - scaling * B @ A."""
    w64 = weight.detach().double()
    u, s, vh = torch.linalg.svd(w64, full_matrices=False)
    r = delta.rank
    root = (s[:r] / delta.scaling).sqrt()
    a64 = root[:, None] * vh[:r]
    b64 = u[:, :r] * root[None, :]
    delta.lora_A.copy_(a64)
    delta.lora_B.copy_(b64)
    # The residual against the factors as stored (float32), so W_res + scaling * B @ A rounds to W.
    return (w64 - delta.scaling * (delta.lora_B.double() @ delta.lora_A.double())).to(weight.dtype)


@torch.no_grad()
def merge(model: nn.Module) -> nn.Module:
    """Every adapter folded into its weight (W + scaling * B @ A, as the adapted forward computes it)."""
    for _, module in list(model.named_modules()):
        if adapter_of(module) is not None:
            parametrize.remove_parametrizations(module, "weight", leave_parametrized=True)
    return model
