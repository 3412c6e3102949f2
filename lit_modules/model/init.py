"""Weight initialization rules, kept separate from model construction.

Rules for the 2-D weights inside the blocks (q/k/v/o, attention gate,
SwiGLU gate/up/down):

- "fixed":        N(0, std) for every matrix.
- "fan_in_power": N(0, d_in ** -gamma), d_in = the matrix's fan-in
                  (nn.Linear.in_features). gamma = 0.5 is LeCun-style init,
                  gamma = 1.0 is the "small initialization" of arXiv 2606.17945.
- "depth_scaled": N(0, std), but output projections (o_proj, down_proj) use
                  std / sqrt(2 * n_layers) (GPT-2 style residual scaling).

UNCONFIRMED: the small-init paper does not say which matrices get
d_in ** -gamma. Here every block Linear uses its own fan-in; the embedding and
LM head are separate knobs (`emb`, `head`) so other readings can be tested:

- emb  "same_rule": fan_in_power -> d_model ** -gamma, otherwise std;
       "fixed": N(0, emb_std); "none": keep PyTorch's default N(0, 1).
- head "same_rule": fan_in_power -> d_model ** -gamma, otherwise std;
       "d_model_rsqrt": d_model ** -0.5. Ignored when embeddings are tied
       (the shared matrix follows `emb`).

Mixture of experts (model/moe.py): every expert matrix follows the block rule with its own fan-in (so
`fan_in_power` gives each expert matrix d_in ** -gamma); the router follows it too unless `router_std` is
set (0 starts from uniform routing).

Norm weights are set to 1. Sampling is plain (untruncated) normal.
"""

import math
from typing import Optional

import torch

from .init_config import InitConfig
from .transformer import Llama

_OUTPUT_PROJECTIONS = ("o_proj.weight", "down_proj.weight")
ROUTER_SUFFIX = "mlp.router.weight"


def _block_matrix_std(name: str, fan_in: int, cfg: InitConfig, n_layers: int) -> float:
    if cfg.rule == "fan_in_power":
        return fan_in ** -cfg.gamma
    if cfg.rule == "depth_scaled" and name.endswith(_OUTPUT_PROJECTIONS):
        return cfg.std / math.sqrt(2 * n_layers)
    return cfg.std


def _same_rule_std(cfg: InitConfig, d_model: int) -> float:
    """Embedding/head std under "same_rule": the embedding's d_in is d_model."""
    return d_model ** -cfg.gamma if cfg.rule == "fan_in_power" else cfg.std


def _target_std(name: str, param: torch.Tensor, model: Llama, cfg: InitConfig) -> Optional[float]:
    """Std for a 2-D weight, or None to leave it untouched."""
    d_model = model.cfg.d_model
    if name == "tok_emb.weight":
        if cfg.emb == "none":
            return None
        return cfg.emb_std if cfg.emb == "fixed" else _same_rule_std(cfg, d_model)
    if name == "lm_head.weight":  # only reached when untied
        return d_model ** -0.5 if cfg.head == "d_model_rsqrt" else _same_rule_std(cfg, d_model)
    if name.endswith(ROUTER_SUFFIX) and cfg.router_std is not None:
        return cfg.router_std
    if name.startswith("layers."):
        return _block_matrix_std(name, param.shape[1], cfg, model.cfg.n_layers)
    raise ValueError(f"init_weights has no rule for parameter {name!r} {tuple(param.shape)}")


@torch.no_grad()
def init_weights(
    model: Llama, cfg: InitConfig, generator: Optional[torch.Generator] = None
) -> dict[str, float]:
    """Initialize every parameter of `model` in place.

    Samples are drawn on the generator's device (CPU by default) and copied,
    so a seeded generator gives the same weights whatever device the model is on.
    Returns the measured std of every 2-D weight keyed by parameter name
    (tied embeddings appear once, as "tok_emb.weight") for step-0 logging.
    """
    problems = cfg.problems()
    if problems:
        raise ValueError("invalid InitConfig:\n  " + "\n  ".join(problems))
    sample_device = generator.device if generator is not None else None
    measured: dict[str, float] = {}
    for name, param in model.named_parameters():  # tied weights are yielded once
        if param.ndim == 1:
            if not name.endswith("norm.weight"):
                raise ValueError(f"init_weights has no rule for parameter {name!r}")
            param.fill_(1.0)
            continue
        if param.ndim != 2:
            raise ValueError(f"init_weights has no rule for parameter {name!r}")
        std = _target_std(name, param, model, cfg)
        if std is not None:
            noise = torch.randn(
                param.shape, generator=generator, device=sample_device or param.device
            )
            param.copy_(noise * std)
        measured[name] = param.float().std().item()
    return measured
