"""MoLS: module-wise learning rates from gradient signal-to-noise ratios (arXiv 2605.05794).

Once, early in warmup, measure each module group's gradient SNR S_m from K extra micro-batches and
scale the group's LR by alpha_m = sqrt(S_base / S_m), ramped in from 1 over the rest of warmup and kept
afterwards (on top of the shared schedule). `mode=manual` applies hand-set multipliers from step 0
instead, so "MoLS matches carefully tuned module LRs" can be tested with the same code path.

Confirmed by the sources: the modules (emb, qk, vo, mlp, head), a single estimate before/within warmup,
no manual tuning. Everything else is UNCONFIRMED and a knob here; `tags()` records each as assumed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lit_modules.techniques.base import Technique
from lit_modules.config.technique_context import TechniqueContext
from lit_modules.techniques.mols.groups import ADAM_GROUPS_UNDER_MUON, group_of, scaled_groups
from lit_modules.techniques.mols.scaling import planned_steps
from lit_modules.techniques.mols.settings import MoLSSettings

if TYPE_CHECKING:  # Lightning loads when a callback is built, not when validation asks a technique
    import lightning as L

    from lit_modules.techniques.mols.callback import MoLSCallback

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


class MoLS(Technique):
    Settings = MoLSSettings
    settings: MoLSSettings

    def manual_scales(self) -> dict[str, float]:
        return {str(k): float(v) for k, v in self.settings.manual_scales.items()}

    # --- groups -------------------------------------------------------------------------------
    def family_to_group(self, family: str) -> str:
        return group_of(family, self.settings.norm_policy, self.settings.attn_gate_group)

    def groups(self) -> list[str]:
        """MoLS groups this run scales (in manual mode: the ones with a multiplier)."""
        s = self.settings
        if s.mode == "manual":
            return list(s.manual_scales)
        return scaled_groups(s.modules, s.norm_policy, s.attn_gate_group)

    # --- checks -------------------------------------------------------------------------------
    def problems(self, cfg, context: TechniqueContext | None = None) -> list[str]:
        p = self.settings_problems()
        if p:
            return p
        s = self.settings
        if s.mode == "snr" and cfg.data.source == "sft":
            p.append("techniques.mols (mode snr) draws its SNR batches from a text corpus; data.source=sft has none.")
        if s.mode == "manual":
            p += self._manual_problems()
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

    def _manual_problems(self) -> list[str]:
        s, p = self.settings, []
        if "norm" in s.manual_scales and s.norm_policy != "own_group":
            p.append("techniques.mols.manual_scales.norm needs techniques.mols.norm_policy=own_group.")
        if "attn_gate" in s.manual_scales and s.attn_gate_group != "own":
            p.append("techniques.mols.manual_scales.attn_gate needs techniques.mols.attn_gate_group=own.")
        if not s.manual_scales:
            p.append("techniques.mols.mode=manual needs at least one entry in techniques.mols.manual_scales.")
        return p

    def _snr_problems(self, cfg, context: TechniqueContext) -> list[str]:
        s, p = self.settings, []
        if s.clip_min is not None and s.clip_max is not None and s.clip_min > s.clip_max:
            p.append("techniques.mols.clip_min must not exceed techniques.mols.clip_max.")
        groups = self.groups()
        if s.base_group not in groups:
            p.append(
                f"techniques.mols.base_group '{s.base_group}' is not one of the scaled groups "
                f"({', '.join(groups)})."
            )
        absent = {"head": bool(cfg.model.tie_embeddings), "attn_gate": cfg.model.attn_gate == "none"}
        if absent.get(s.base_group):
            p.append(f"techniques.mols.base_group '{s.base_group}' has no parameters in this model.")
        p += self._timing_problems(context.budget)
        return p

    def _timing_problems(self, budget) -> list[str]:
        if budget is None or budget.steps < 1:
            return []  # a broken budget is reported by the core validator
        s = self.settings
        at, warmup = planned_steps(budget.steps, s.warmup_steps, s.warmup_fraction, s.estimate_step,
                                   s.estimate_fraction)
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

        s = self.settings
        return MoLSCallback(
            groups=self.groups(),
            family_to_group=self.family_to_group,
            base_group=s.base_group,
            estimator=s.estimator,
            eps=s.eps,
            debias=s.debias,
            ignore_dead_coords=s.ignore_dead_coords,
            extra_micro_batches=s.extra_micro_batches,
            micro_batch_size=s.micro_batch_size,
            estimate_step=s.estimate_step,
            estimate_fraction=s.estimate_fraction,
            warmup_steps=s.warmup_steps,
            warmup_fraction=s.warmup_fraction,
            ramp_shape=s.ramp,
            clip_min=s.clip_min,
            clip_max=s.clip_max,
            decay_follows_lr=s.decay_follows_lr,
            manual_alphas=self.manual_scales() if s.mode == "manual" else None,
        )

    def callbacks(self) -> list[L.Callback]:
        return [self.callback()]

    def tags(self) -> dict[str, str]:
        s = self.settings
        tags = {
            "mols.mode": s.mode,
            "mols.groups": ",".join(self.groups()),
            "mols.norm_policy": s.norm_policy,
            "mols.attn_gate_group": s.attn_gate_group,
            "mols.decay_follows_lr": str(s.decay_follows_lr).lower(),
            "fidelity.mols.groups": "secondary",
        }
        if s.mode == "manual":
            tags["mols.manual_scales"] = ",".join(f"{k}={v:g}" for k, v in self.manual_scales().items())
            assumed = ("norm_policy", "attn_gate_group", "decay_follows_lr")
        else:
            at = (
                f"step {s.estimate_step}"
                if s.estimate_step is not None
                else f"fraction {s.estimate_fraction:g}"
            )
            tags.update(
                {
                    "mols.estimator": s.estimator,
                    "mols.base_group": s.base_group,
                    "mols.extra_micro_batches": str(s.extra_micro_batches),
                    "mols.micro_batch_size": str(s.micro_batch_size or "data.batch_size"),
                    "mols.estimate_at": at,
                    "mols.ramp": s.ramp,
                    "mols.clip": f"[{s.clip_min}, {s.clip_max}]",
                    "mols.debias": str(s.debias).lower(),
                    "mols.ignore_dead_coords": str(s.ignore_dead_coords).lower(),
                    "mols.eps": f"{s.eps:g}",
                    "mols.sample_source": "disjoint_training_windows",
                }
            )
            assumed = ASSUMED_KNOBS
        tags.update({f"fidelity.mols.{k}": "assumed" for k in assumed})
        return tags
