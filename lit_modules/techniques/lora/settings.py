"""LoRA's settings: the variant, the adapters' rank and scale, where they go, and two policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from lit_modules.techniques.lora.adapter import VARIANTS
from lit_modules.techniques.pc_layer.settings import TARGET_PATHS as PC_TARGET_PATHS
from lit_modules.typed_settings import Bound, Listed, OneOf

TARGET_PATHS = {**PC_TARGET_PATHS, "attn_gate": "attn.gate_proj"}  # q_proj ... down_proj, + the output gate
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
Target = Annotated[str, OneOf(tuple(TARGET_PATHS))]


@dataclass
class LoraSettings:
    variant: Annotated[str, OneOf(VARIANTS)] = "lora"
    rank: Annotated[int, Bound(ge=1)] = 8
    alpha: Annotated[float, Bound(gt=0)] = 16.0
    targets: Annotated[list[Target], Listed(non_empty=True)] = field(default_factory=lambda: list(DEFAULT_TARGETS))
    seed: int = 0  # draws A (the run's seed in conf/lora/lora.yaml)
    from_scratch: bool = False  # false refuses a run without init_from: adapters on random weights are rarely meant
    decay: bool = False  # the factors take weight decay (optim.weight_decay) only when true
