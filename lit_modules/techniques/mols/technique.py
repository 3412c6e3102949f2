"""MoLS: module-wise learning rates from gradient signal-to-noise ratios (arXiv 2605.05794).

Once, early in warmup, measure each module group's gradient SNR S_m from K extra micro-batches and
scale the group's LR by alpha_m = sqrt(S_base / S_m), ramped in from 1 over the rest of warmup and kept
afterwards (on top of the shared schedule). `mode=manual` applies hand-set multipliers from step 0
instead, so "MoLS matches carefully tuned module LRs" can be tested with the same code path.

Confirmed by the sources: the modules (emb, qk, vo, mlp, head), a single estimate before/within warmup,
no manual tuning. Everything else is UNCONFIRMED and a knob here; `tags()` records each as assumed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from lit_modules.techniques.base import Technique
from lit_modules.config.technique_context import TechniqueContext
from lit_modules.techniques.registry import register
from lit_modules.techniques.mols.groups import (
    ADAM_GROUPS_UNDER_MUON,
    ATTN_GATE_GROUPS,
    NORM_POLICIES,
    MODULES,
    PAPER_GROUPS,
    group_of,
    scaled_groups,
)
from lit_modules.techniques.mols.scaling import RAMP_SHAPES, planned_steps
from lit_modules.techniques.mols.snr import ESTIMATORS

if TYPE_CHECKING:  # Lightning loads when a callback is built, not when validation asks a technique
    import lightning as L

    from lit_modules.techniques.mols.callback import MoLSCallback

MODES = ("snr", "manual")
# Knobs no reachable source fixes; each is tagged fidelity.mols.<knob>=assumed.
ASSUMED_KNOBS = (
    "estimator",
    "base_group",
    "extra_micro_batches",
    "micro_batch_size",
    "estimate_at",
    "ramp",
    "norm_policy",
    "attn_gate_group",
    "clip",
    "debias",
    "ignore_dead_coords",
    "eps",
    "decay_follows_lr",
    "sample_source",
)


def _plain(value: Any) -> Any:
    """Hydra hands dict/list knobs over as OmegaConf containers; keep plain Python inside the technique."""
    return (
        OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value
    )


@register("mols")
class MoLS(Technique):

    def __init__(
        self,
        mode: str = "snr",
        estimator: str = "per_coord",
        base_group: str = "vo",
        modules: Sequence[str] = PAPER_GROUPS,
        norm_policy: str = "exclude",
        attn_gate_group: str = "vo",
        extra_micro_batches: int = 8,
        micro_batch_size: int | None = None,
        estimate_step: int | None = None,
        estimate_fraction: float = 0.01,
        eps: float = 1e-3,
        debias: bool = False,
        ignore_dead_coords: bool = True,
        clip_min: float | None = None,
        clip_max: float | None = None,
        ramp: str = "linear",
        decay_follows_lr: bool = True,
        manual_scales: Mapping[str, float] | None = None,
        warmup_steps: int | None = None,
        warmup_fraction: float = 0.05,
    ):
        self.mode = mode
        self.estimator, self.base_group = estimator, base_group
        self.modules = list(_plain(modules))
        self.norm_policy, self.attn_gate_group = norm_policy, attn_gate_group
        self.extra_micro_batches, self.micro_batch_size = extra_micro_batches, micro_batch_size
        self.estimate_step, self.estimate_fraction = estimate_step, estimate_fraction
        self.eps, self.debias, self.ignore_dead_coords = eps, debias, ignore_dead_coords
        self.clip_min, self.clip_max = clip_min, clip_max
        self.ramp, self.decay_follows_lr = ramp, decay_follows_lr
        self.manual_scales = {str(k): float(v) for k, v in dict(_plain(manual_scales) or {}).items()}
        # Wired from schedule.* by the config (the ramp ends where warmup ends).
        self.warmup_steps, self.warmup_fraction = warmup_steps, warmup_fraction

    # --- groups -------------------------------------------------------------------------------
    def family_to_group(self, family: str) -> str:
        return group_of(family, self.norm_policy, self.attn_gate_group)

    def groups(self) -> list[str]:
        """MoLS groups this run scales (in manual mode: the ones with a multiplier)."""
        if self.mode == "manual":
            return [g for g in self.manual_scales]
        return scaled_groups(self.modules, self.norm_policy, self.attn_gate_group)

    # --- checks -------------------------------------------------------------------------------
    def problems(self, cfg, context: TechniqueContext | None = None) -> list[str]:
        p: list[str] = []
        choices = {
            "mode": (self.mode, MODES),
            "estimator": (self.estimator, ESTIMATORS),
            "ramp": (self.ramp, RAMP_SHAPES),
            "norm_policy": (self.norm_policy, NORM_POLICIES),
            "attn_gate_group": (self.attn_gate_group, ATTN_GATE_GROUPS),
        }
        for key, (value, allowed) in choices.items():
            if value not in allowed:
                p.append(f"techniques.mols.{key} must be one of {', '.join(allowed)}, not '{value}'.")
        if p:
            return p
        if self.mode == "snr" and cfg.data.source == "sft":
            p.append("techniques.mols (mode snr) draws its SNR batches from a text corpus; data.source=sft has none.")
        unknown = [m for m in self.modules if m not in MODULES]
        if unknown:
            p.append(
                f"techniques.mols.modules may only name {', '.join(MODULES)}; "
                f"unknown: {', '.join(unknown)}."
            )
        if self.mode == "manual":
            p += self._manual_problems(cfg)
        else:
            p += self._snr_problems(cfg, context or TechniqueContext.of(cfg, techniques=[]))
        if cfg.trainer.strategy == "fsdp":
            p.append(
                "MoLS measures gradients on the unwrapped model and does not support trainer.strategy=fsdp."
            )
        if cfg.optim.name == "muon":
            adam = [g for g in self.groups() if g in ADAM_GROUPS_UNDER_MUON]
            if not adam:
                p.append(
                    "Under optim=muon MoLS scales only AdamW-managed groups "
                    f"({', '.join(ADAM_GROUPS_UNDER_MUON)}), and none of its groups "
                    f"({', '.join(self.groups()) or 'none'}) is one; add emb or head to "
                    "techniques.mols.modules or use optim=adamw."
                )
        return p

    def _manual_problems(self, cfg) -> list[str]:
        p = []
        allowed = set(MODULES) | {"norm", "attn_gate"}
        for group, scale in self.manual_scales.items():
            if group not in allowed:
                p.append(
                    f"techniques.mols.manual_scales has unknown group '{group}' "
                    f"(use {', '.join(sorted(allowed))})."
                )
            elif not (math.isfinite(scale) and scale > 0):
                p.append(f"techniques.mols.manual_scales.{group} must be a positive number, not {scale}.")
        if "norm" in self.manual_scales and self.norm_policy != "own_group":
            p.append("techniques.mols.manual_scales.norm needs techniques.mols.norm_policy=own_group.")
        if "attn_gate" in self.manual_scales and self.attn_gate_group != "own":
            p.append("techniques.mols.manual_scales.attn_gate needs techniques.mols.attn_gate_group=own.")
        if not self.manual_scales:
            p.append("techniques.mols.mode=manual needs at least one entry in techniques.mols.manual_scales.")
        return p

    def _snr_problems(self, cfg, context: TechniqueContext) -> list[str]:
        p = []
        if self.extra_micro_batches < 2:
            p.append("techniques.mols.extra_micro_batches must be at least 2 to measure a gradient variance.")
        if self.micro_batch_size is not None and self.micro_batch_size < 1:
            p.append("techniques.mols.micro_batch_size must be at least 1 (or null for data.batch_size).")
        if not self.eps > 0:
            p.append("techniques.mols.eps must be positive.")
        for key in ("clip_min", "clip_max"):
            value = getattr(self, key)
            if value is not None and not value > 0:
                p.append(f"techniques.mols.{key} must be positive or null.")
        if self.clip_min is not None and self.clip_max is not None and self.clip_min > self.clip_max:
            p.append("techniques.mols.clip_min must not exceed techniques.mols.clip_max.")
        if self.estimate_step is None and not 0 < self.estimate_fraction < 1:
            p.append("techniques.mols.estimate_fraction must be in (0, 1).")
        if self.estimate_step is not None and self.estimate_step < 0:
            p.append("techniques.mols.estimate_step must be >= 0.")
        groups = self.groups()
        if self.base_group not in groups:
            p.append(
                f"techniques.mols.base_group '{self.base_group}' is not one of the scaled groups "
                f"({', '.join(groups)})."
            )
        absent = {"head": bool(cfg.model.tie_embeddings), "attn_gate": cfg.model.attn_gate == "none"}
        if absent.get(self.base_group):
            p.append(f"techniques.mols.base_group '{self.base_group}' has no parameters in this model.")
        p += self._timing_problems(context.budget)
        return p

    def _timing_problems(self, budget) -> list[str]:
        if budget is None or budget.steps < 1:
            return []  # a broken budget is reported by the core validator
        at, warmup = planned_steps(budget.steps, self.warmup_steps, self.warmup_fraction, self.estimate_step,
                                   self.estimate_fraction)
        if at >= warmup:
            sentence = (
                f"MoLS must estimate before warmup ends, but it would estimate at step {at} and warmup ends "
                f"at step {warmup}; lengthen warmup (schedule.warmup_fraction) or set "
                "techniques.mols.estimate_step."
            )
            return [sentence]
        return []

    # --- hooks --------------------------------------------------------------------------------
    def callback(self) -> MoLSCallback:
        from lit_modules.techniques.mols.callback import MoLSCallback

        return MoLSCallback(
            groups=self.groups(),
            family_to_group=self.family_to_group,
            base_group=self.base_group,
            estimator=self.estimator,
            eps=self.eps,
            debias=self.debias,
            ignore_dead_coords=self.ignore_dead_coords,
            extra_micro_batches=self.extra_micro_batches,
            micro_batch_size=self.micro_batch_size,
            estimate_step=self.estimate_step,
            estimate_fraction=self.estimate_fraction,
            warmup_steps=self.warmup_steps,
            warmup_fraction=self.warmup_fraction,
            ramp_shape=self.ramp,
            clip_min=self.clip_min,
            clip_max=self.clip_max,
            decay_follows_lr=self.decay_follows_lr,
            manual_alphas=dict(self.manual_scales) if self.mode == "manual" else None,
        )

    def callbacks(self) -> list[L.Callback]:
        return [self.callback()]

    def tags(self) -> dict[str, str]:
        tags = {
            "mols.mode": self.mode,
            "mols.groups": ",".join(self.groups()),
            "mols.norm_policy": self.norm_policy,
            "mols.attn_gate_group": self.attn_gate_group,
            "mols.decay_follows_lr": str(self.decay_follows_lr).lower(),
            "fidelity.mols.groups": "secondary",
        }
        if self.mode == "manual":
            tags["mols.manual_scales"] = ",".join(f"{k}={v:g}" for k, v in self.manual_scales.items())
            assumed = ("norm_policy", "attn_gate_group", "decay_follows_lr")
        else:
            at = (
                f"step {self.estimate_step}"
                if self.estimate_step is not None
                else f"fraction {self.estimate_fraction:g}"
            )
            tags.update(
                {
                    "mols.estimator": self.estimator,
                    "mols.base_group": self.base_group,
                    "mols.extra_micro_batches": str(self.extra_micro_batches),
                    "mols.micro_batch_size": str(self.micro_batch_size or "data.batch_size"),
                    "mols.estimate_at": at,
                    "mols.ramp": self.ramp,
                    "mols.clip": f"[{self.clip_min}, {self.clip_max}]",
                    "mols.debias": str(self.debias).lower(),
                    "mols.ignore_dead_coords": str(self.ignore_dead_coords).lower(),
                    "mols.eps": f"{self.eps:g}",
                    "mols.sample_source": "disjoint_training_windows",
                }
            )
            assumed = ASSUMED_KNOBS
        tags.update({f"fidelity.mols.{k}": "assumed" for k in assumed})
        return tags
