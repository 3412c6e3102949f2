"""WISCA (arXiv 2508.16676): jump to an equivalent model whose (W_q, W_k) and (W_v, W_o) L1 norms match.

Selected with `wisca=<option>` (conf/wisca/*.yaml, package techniques.wisca). When it runs:
- at_init:        once in `transform_model`, right after initialization. Deterministic from the seeded
                  init, so re-applying it on resume is harmless (the checkpoint's weights are loaded after).
- every_n_steps:  after every N-th optimizer step (0 = never), in a callback under torch.no_grad(); the
                  paper uses N = 250. The count of the last transition is saved in the checkpoint so a
                  resumed run (or a gradient-accumulation micro-batch at the same step) never repeats one.

DDP: the scales are a deterministic function of the weights, which every rank holds identically, so every
rank computes the same scales; when torch.distributed is initialized they are additionally broadcast from
rank 0 so no reduction-order difference can ever make the replicas drift apart. FSDP shards the weights,
so it is refused. The math is in `rescales.py`, the optimizer-state policy in `opt_state.py`, the periodic hook in
`callback.py`.

With the PC layer (`pc_layer=level*`) a target's weight is computed from a raw one; the factor then goes to the
raw weight (which also holds the optimizer state), and that is exact only where the PC map carries it
(`scalable_weight.py`): a scalar with norm recovery on, a per-channel factor only at level 0. Every other
combination is refused by `problems()`, checked on the model with all the run's techniques applied.

With LoRA (`lora=...`, techniques/lora/), `lora=true` balances each adapter's factor pair (B, A) instead
(`lora_rescales.py`, tensor or per-rank-channel level), on the same schedule and optimizer-state policies;
the frozen attention pairs are not rescaled (qk and vo are refused on adapted projections).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

from lit_modules.techniques.base import Technique
from lit_modules.config.technique_context import TechniqueContext
from lit_modules.techniques.scalable_weight import scaling_problem
from lit_modules.techniques.wisca.rescales import (
    Rescale,
    apply_rescales,
    plan_qk,
    plan_vo,
    scaled_projections,
)
from lit_modules.techniques.wisca.lora_rescales import has_adapters, plan_lora_model
from lit_modules.techniques.wisca.settings import PAPER_PERIOD, WiscaSettings

if TYPE_CHECKING:  # Lightning loads when the transitions callback is built, not when validation asks
    import lightning as L

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj")
QK_NORM_NAMES = ("q_norm", "k_norm")


def structure_problems(model: nn.Module, qk: bool, scaled: Sequence[tuple[str, str, str]] = ()) -> list[str]:
    """Reasons WISCA cannot transform `model` exactly (one sentence each; empty = fine).

    `scaled` lists (pair, projection, kind of factor) for every weight the transition multiplies; a weight
    whose parametrization cannot carry its factor (the PC layer without norm recovery, or with a per-channel
    factor above level 0) is refused here, since the transition would silently change the function.
    """
    layers = getattr(model, "layers", None)
    if layers is None:
        return ["WISCA needs a model with attention blocks at `layers[i].attn`."]
    for i, layer in enumerate(layers):
        attn = getattr(layer, "attn", None)
        missing = [p for p in PROJECTIONS if not isinstance(getattr(attn, p, None), nn.Linear)]
        if missing:
            names = ", ".join(missing)
            return [f"WISCA needs {names} to be plain nn.Linear modules in layer {i}'s attention."]
        if any(getattr(attn, p).bias is not None for p in PROJECTIONS):
            return [f"WISCA does not rescale projection biases, and layer {i}'s attention has one."]
        if qk and any(name.rsplit(".", 1)[-1] in QK_NORM_NAMES for name, _ in layer.named_modules()):
            return [
                "WISCA's QK scaling is not output-preserving with QK-norm (q_norm/k_norm re-normalize each "
                "head after the projection), so set techniques.wisca.qk=false for this model."
            ]
    refused: dict[tuple[str, str], list[str]] = {}  # (pair, reason) -> projections, in plan order
    for pair, proj, kind in scaled:
        for layer in layers:
            reason = scaling_problem(getattr(layer.attn, proj), kind)
            if reason and proj not in refused.setdefault((pair, reason), []):
                refused[(pair, reason)].append(proj)
    problems = []
    for (pair, reason), projs in refused.items():
        names = " and ".join(projs)
        channel = any(kind != "tensor" for p, _, kind in scaled if p == pair)
        alternative = f", use techniques.wisca.{pair}_granularity=tensor," if channel else ""
        problems.append(
            f"WISCA's {pair.upper()} transition cannot rescale {names} exactly: {reason}; set "
            f"techniques.wisca.{pair}=false{alternative} or keep {names} out of techniques.pc_layer.targets."
        )
    return problems


def _broadcast_from_rank0(rescales: list[Rescale]) -> list[Rescale]:
    """Identical scales on every rank, whatever the reduction order (no-op when not distributed)."""
    if not (dist.is_available() and dist.is_initialized()) or not rescales:
        return rescales
    flat = torch.cat([r.factor.reshape(-1).float() for r in rescales])
    dist.broadcast(flat, src=0)
    out, offset = [], 0
    for r in rescales:
        n = r.factor.numel()
        out.append(Rescale(r.name, r.param, flat[offset : offset + n].view_as(r.factor).to(r.factor.dtype)))
        offset += n
    return out


class Wisca(Technique):
    Settings = WiscaSettings
    settings: WiscaSettings

    def __init__(self, **settings: Any) -> None:
        super().__init__(**settings)
        self.init_metrics: dict[str, float] = {}  # filled by transform_model when at_init

    # ------------------------------------------------------------------ validation

    def knob_problems(self) -> list[str]:
        """Its settings' own checks, then the combinations that would do nothing or cannot be done."""
        knob, s = "techniques.wisca", self.settings
        p = self.settings_problems()
        # `is` comparisons: a setting its type refused (a word for a flag) is not read as true or false here.
        if s.qk is False and s.vo is False and s.lora is False:
            p.append(f"WISCA with {knob}.qk=false, vo=false and lora=false rescales nothing; enable one of them.")
        if s.lora is True and s.at_init is True:
            p.append(
                f"{knob}.at_init=true transitions before LoRA's adapters exist (they attach once the starting "
                f"weights are loaded); with {knob}.lora=true use at_init=false and every_n_steps."
            )
        if s.every_n_steps == 0 and s.at_init is False:
            p.append(f"WISCA with {knob}.every_n_steps=0 and at_init=false never runs; enable one of them.")
        return p

    def problems(self, cfg: Any, context: TechniqueContext | None = None) -> list[str]:
        s = self.settings
        knob = "techniques.wisca"
        p = self.knob_problems()
        trainer = cfg.get("trainer") or {}
        if trainer.get("strategy") == "fsdp":
            p.append(
                "WISCA needs the full q/k/v/o weights on every rank, but FSDP shards them; use strategy=ddp."
            )
        if trainer.get("precision") == "bf16-true":
            p.append(
                "WISCA is exactly output-preserving only with fp32 weights, and trainer.precision=bf16-true "
                "has no fp32 master copy; use bf16-mixed."
            )
        optim = cfg.get("optim") or {}
        if optim.get("name") == "adam_mini" and s.opt_state != "keep":
            p.append(
                f"{knob}.opt_state={s.opt_state} has no rule for Adam-mini's per-block second moments (one "
                f"value shared by rows a channel-level factor scales differently); use {knob}.opt_state=keep."
            )
        # Exactness is a property of the model as trained, whenever a transition runs: an at-init transition
        # scales raw weights before the PC layer is attached, which is the same as scaling them after. Asked
        # only of settings that passed their own checks (a granularity they refused plans nothing).
        if self.settings_problems():
            return p
        model = (context or TechniqueContext.of(cfg)).model_as_trained(without=self.name)
        if model is not None:
            p += structure_problems(model, s.qk, self.scaled_weights())
            if s.lora and not has_adapters(model):
                p.append(
                    "techniques.wisca.lora=true balances LoRA adapters, and this run has none; add lora=lora "
                    "(or rslora, pissa) or set techniques.wisca.lora=false."
                )
        return p

    def scaled_weights(self) -> list[tuple[str, str, str]]:
        """(pair, projection, kind of factor) for every weight a transition multiplies."""
        s = self.settings
        pairs = [("qk", s.qk_granularity)] * s.qk + [("vo", s.vo_granularity)] * s.vo
        return [(pair, proj, kind) for pair, g in pairs for proj, kind in scaled_projections(pair, g)]

    # ------------------------------------------------------------------ the transition

    def transition(self, model: nn.Module) -> tuple[list[Rescale], dict[str, float]]:
        """Rescale every layer in place; returns the rescales and per-layer metrics measured before them."""
        s = self.settings
        problems = structure_problems(model, s.qk, self.scaled_weights())
        if problems:
            raise ValueError(problems[0])
        rescales: list[Rescale] = []
        metrics: dict[str, float] = {}
        for i, layer in enumerate(model.layers if s.qk or s.vo else ()):
            attn = layer.attn
            layer_rescales: list[Rescale] = []
            if s.qk:
                r, stats = plan_qk(attn, s.qk_granularity, s.channel_reduce)
                layer_rescales += r
                metrics.update({f"wisca/layer{i}/{k}": v for k, v in stats.items()})
            if s.vo:
                r, stats = plan_vo(attn, s.vo_granularity, s.channel_reduce)
                layer_rescales += r
                metrics.update({f"wisca/layer{i}/{k}": v for k, v in stats.items()})
            gate = getattr(attn, "gate_proj", None)
            # The output gate is a separate Linear; scaling it would change sigmoid(gate), so it never is.
            assert gate is None or all(r.param is not gate.weight for r in layer_rescales), "gate rescaled"
            rescales += layer_rescales
        if s.lora:
            lora_rescales, lora_metrics = plan_lora_model(model, s.lora_granularity)
            rescales += lora_rescales
            metrics.update(lora_metrics)
        rescales = _broadcast_from_rank0(rescales)
        apply_rescales(rescales)
        return rescales, metrics

    # ------------------------------------------------------------------ hooks

    def transform_model(self, model: nn.Module) -> nn.Module:
        if self.settings.at_init:
            _, self.init_metrics = self.transition(model)
        return model

    def callbacks(self) -> list[L.Callback]:
        from lit_modules.techniques.wisca.callback import WiscaTransitions  # Lightning: not for validation

        return [WiscaTransitions(self)]

    def tags(self) -> dict[str, str]:
        s = self.settings
        tags = {
            "wisca.qk": str(s.qk).lower(),
            "wisca.vo": str(s.vo).lower(),
            "wisca.qk_granularity": s.qk_granularity if s.qk else "off",
            "wisca.vo_granularity": s.vo_granularity if s.vo else "off",
            "wisca.every_n_steps": str(s.every_n_steps),
            "wisca.at_init": str(s.at_init).lower(),
            "wisca.opt_state": s.opt_state,
            # No source says what the authors did with the optimizer state.
            "fidelity.wisca.opt_state": "assumed",
        }
        if s.lora:
            tags["wisca.lora_granularity"] = s.lora_granularity
            # papers.md: WISCA helps LoRA, the mechanism is UNCONFIRMED; A/B balancing is its candidate (i).
            tags["fidelity.wisca.lora"] = "assumed"
        if s.every_n_steps not in (0, PAPER_PERIOD):
            tags["fidelity.wisca.every_n_steps"] = f"deviates (paper: {PAPER_PERIOD})"
        if s.every_n_steps > 0 and not s.at_init:
            # Whether the periodic variant also transitions at step 0 is not stated; we assume not.
            tags["fidelity.wisca.periodic_skips_init"] = "assumed"
        qk_channel = s.qk and s.qk_granularity == "channel"
        if qk_channel or (s.vo and s.vo_granularity == "channel"):
            tags["wisca.channel_reduce"] = s.channel_reduce
            tags["fidelity.wisca.channel_formula"] = "unconfirmed"
            tags["fidelity.wisca.channel_reduce"] = "unconfirmed"
        return tags
