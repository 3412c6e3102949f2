"""MoLS's settings. The sources confirm the modules and a single early estimate; every other default is an
assumption, tagged fidelity.mols.<knob>=assumed by the technique."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Optional

from lit_modules.techniques.mols.groups import ATTN_GATE_GROUPS, MODULES, NORM_POLICIES, PAPER_GROUPS
from lit_modules.techniques.mols.scaling import RAMP_SHAPES
from lit_modules.techniques.mols.snr import ESTIMATORS
from lit_modules.typed_settings import Bound, Listed, OneOf

MODES = ("snr", "manual")
MANUAL_GROUPS = (*MODULES, "norm", "attn_gate")  # norm needs norm_policy=own_group, attn_gate attn_gate_group=own
Positive = Annotated[float, Bound(gt=0, text="positive")]


@dataclass
class MoLSSettings:
    mode: Annotated[str, OneOf(MODES)] = "snr"  # manual: manual_scales from step 0, no estimate
    estimator: Annotated[str, OneOf(ESTIMATORS)] = "per_coord"
    base_group: Annotated[str, OneOf(MANUAL_GROUPS)] = "vo"  # alpha = 1; one of the run's scaled groups
    modules: Annotated[list[Annotated[str, OneOf(MODULES)]], Listed()] = field(
        default_factory=lambda: list(PAPER_GROUPS))
    norm_policy: Annotated[str, OneOf(NORM_POLICIES)] = "exclude"
    attn_gate_group: Annotated[str, OneOf(ATTN_GATE_GROUPS)] = "vo"
    extra_micro_batches: Annotated[int, Bound(ge=2, text="at least 2 to measure a gradient variance")] = 8
    micro_batch_size: Optional[Annotated[int, Bound(ge=1)]] = None  # null: data.batch_size
    estimate_step: Optional[Annotated[int, Bound(ge=0)]] = None  # null: estimate_fraction of the steps
    estimate_fraction: Annotated[float, Bound(gt=0, lt=1)] = 0.01
    eps: Annotated[float, Bound(gt=0)] = 1e-3
    debias: bool = False
    ignore_dead_coords: bool = True
    clip_min: Optional[Positive] = None
    clip_max: Optional[Positive] = None
    ramp: Annotated[str, OneOf(RAMP_SHAPES)] = "linear"
    decay_follows_lr: bool = True
    manual_scales: dict[Annotated[str, OneOf(MANUAL_GROUPS)], Annotated[float, Bound(gt=0)]] = field(
        default_factory=dict)
    # Wired from schedule.* by the config (the ramp ends where warmup ends); not knobs.
    warmup_steps: Optional[int] = None
    warmup_fraction: float = 0.05
