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
from dataclasses import dataclass
from typing import Optional

import torch

from .transformer import Llama

INIT_RULES = ("fixed", "fan_in_power", "depth_scaled")
EMB_RULES = ("same_rule", "fixed", "none")
HEAD_RULES = ("same_rule", "d_model_rsqrt")
_OUTPUT_PROJECTIONS = ("o_proj.weight", "down_proj.weight")
ROUTER_SUFFIX = "mlp.router.weight"
# Fields added after runs were recorded, at the value that changes nothing (see model/config.py).
ADDED_DEFAULTS = {"router_std": None}


@dataclass
class InitConfig:
    rule: str = "fixed"  # "fixed" | "fan_in_power" | "depth_scaled"
    std: float = 0.02
    gamma: float = 0.5  # only for fan_in_power
    emb: str = "same_rule"  # "same_rule" | "fixed" | "none"
    emb_std: float = 0.02  # only for emb == "fixed"
    head: str = "same_rule"  # "same_rule" | "d_model_rsqrt"
    router_std: Optional[float] = None  # MoE router: None = the block rule (fan-in d_model); 0 = zeros (uniform)

    def problems(self) -> list[str]:
        """Human-readable reasons this init config is unusable (empty = fine)."""
        out: list[str] = []
        if self.rule not in INIT_RULES:
            out.append(f"rule must be one of {INIT_RULES}, got {self.rule!r}.")
        if self.emb not in EMB_RULES:
            out.append(f"emb must be one of {EMB_RULES}, got {self.emb!r}.")
        if self.head not in HEAD_RULES:
            out.append(f"head must be one of {HEAD_RULES}, got {self.head!r}.")
        if not self.std > 0:
            out.append(f"std must be positive, got {self.std}.")
        if not self.emb_std > 0:
            out.append(f"emb_std must be positive, got {self.emb_std}.")
        if not self.gamma >= 0:
            out.append(f"gamma must be >= 0, got {self.gamma}.")
        if self.router_std is not None and not self.router_std >= 0:
            out.append(f"router_std must be >= 0 (0 = zeros) or null, got {self.router_std}.")
        return out

    def tags(self, tie_embeddings: bool = False) -> dict[str, str]:
        """Run tags for the embedding and head rules (see the module docstring).

        papers.md leaves which matrices get d_in ** -gamma UNCONFIRMED and marks the default (the rule with
        d_in = d_model for both) as an assumption; the other readings are no better confirmed, so the
        fidelity tag is `assumed` whichever is chosen, and `init.emb`/`init.head` record the choice. With
        tied embeddings the head is the embedding matrix and follows `emb`.
        """
        return {
            "init.emb": self.emb,
            "init.head": "tied" if tie_embeddings else self.head,
            "fidelity.init.emb": "assumed",
            "fidelity.init.head": "assumed",
        }


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
