"""Token budget arithmetic: how many tokens and optimizer steps a run gets, and what one token costs."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf

from lit_modules.model import LlamaConfig


@dataclass(frozen=True)
class Budget:
    params_total: int
    params_non_embedding: int
    tokens_per_step: int  # global: micro-batch x seq_len x world size x accumulation
    total_tokens: int
    steps: int
    warmup_steps: int
    flops_per_token: float
    tokens_per_param: float  # achieved, against the count the regime names
    requested_tokens: int | None = None  # what the regime asked for, before rounding down to whole steps
    params_active_non_embedding: int | None = None  # per token (MoE: top-k experts); = non_embedding when dense

    def as_dict(self) -> dict:
        out = dict(self.__dict__)
        if out["params_active_non_embedding"] in (None, self.params_non_embedding):
            del out["params_active_non_embedding"]  # dense: the same number, recorded as before
        return out


def model_config(node) -> LlamaConfig:
    return OmegaConf.to_object(node) if isinstance(node, DictConfig) else node


def parameter_counts(model_cfg: LlamaConfig) -> dict:
    """Counts without allocating weights (meta device, nothing initialized), so a 1B dry run is instant."""
    # Here, not at the top: counting.py imports torch, which a refusal never needs.
    from lit_modules.model import count_parameters
    from lit_modules.model.meta import meta_llama

    return count_parameters(meta_llama(model_config(model_cfg)))


def world_size(cfg) -> int:
    return max(1, int(cfg.trainer.devices)) * max(1, int(cfg.trainer.num_nodes))


def compute_budget(cfg) -> Budget:
    """Budget from the regime (tokens per parameter or explicit tokens), capped by trainer.max_steps."""
    from lit_modules.model import flops_per_token  # torch, as in parameter_counts

    counts = parameter_counts(cfg.model)
    tokens_per_step = (
        cfg.data.batch_size * cfg.data.seq_len * world_size(cfg) * cfg.trainer.accumulate_grad_batches
    )
    # Tokens per ACTIVE parameter: the same count as before for a dense model (model/counting.py).
    counted = counts["active_non_embedding"] if cfg.regime.param_count == "non_embedding" else counts["active"]
    if cfg.regime.tokens_per_param is not None:
        tokens = int(cfg.regime.tokens_per_param * counted)
    elif cfg.regime.tokens is not None:
        tokens = int(cfg.regime.tokens)
    else:
        tokens = None
    steps = tokens // tokens_per_step if tokens is not None else None  # whole steps within budget
    if cfg.trainer.max_steps is not None:
        steps = cfg.trainer.max_steps if steps is None else min(steps, cfg.trainer.max_steps)
    if steps is None:
        steps = 0
    if cfg.schedule.warmup_steps is not None:
        warmup = int(cfg.schedule.warmup_steps)
    else:
        warmup = int(round(cfg.schedule.warmup_fraction * steps))
    total_tokens = steps * tokens_per_step
    fpt = flops_per_token(model_config(cfg.model), cfg.data.seq_len)["total"]
    return Budget(
        params_total=counts["total"],
        params_non_embedding=counts["non_embedding"],
        tokens_per_step=tokens_per_step,
        total_tokens=total_tokens,
        steps=steps,
        warmup_steps=min(warmup, steps),
        flops_per_token=float(fpt),
        tokens_per_param=total_tokens / max(counted, 1),
        requested_tokens=tokens,
        params_active_non_embedding=counts["active_non_embedding"],
    )
