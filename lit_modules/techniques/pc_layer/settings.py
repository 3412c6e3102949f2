"""The PC layer's settings, at the official release's defaults: level 4 (the paper's with AdamW), norm
recovery, one learnable gamma per matrix, FFN + attention output as targets, 10 power iterations, eps 1e-7."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from lit_modules.techniques.pc_layer.polynomials import PC_COEFFICIENTS
from lit_modules.typed_settings import Bound, Listed, OneOf

# Target name -> module-path suffix. "gate_proj" is SwiGLU's gate; the attention output gate
# (attn.gate_proj) is not a PC target in the paper and is not offered.
TARGET_PATHS = {
    "q_proj": "attn.q_proj",
    "k_proj": "attn.k_proj",
    "v_proj": "attn.v_proj",
    "o_proj": "attn.o_proj",
    "gate_proj": "mlp.gate_proj",
    "up_proj": "mlp.up_proj",
    "down_proj": "mlp.down_proj",
}
DEFAULT_TARGETS = ("gate_proj", "up_proj", "down_proj", "o_proj")  # released configs: FFN + O
Target = Annotated[str, OneOf(tuple(TARGET_PATHS))]


@dataclass
class PCLayerSettings:
    level: Annotated[int, OneOf(tuple(sorted(PC_COEFFICIENTS)), "the published table")] = 4
    recover_norm: bool = True
    learnable_gamma: bool = True
    targets: Annotated[list[Target], Listed(non_empty=True, unique=True)] = field(
        default_factory=lambda: list(DEFAULT_TARGETS))
    power_iters: Annotated[int, Bound(ge=1)] = 10  # after every optimizer step
    eps: Annotated[float, Bound(gt=0)] = 1e-7
    # Mixture of experts: also precondition each routed and shared expert's FFN targets (gate/up/down).
    # Not in the conf/pc_layer files (their nodes, hence the presets' hashes, stay as they were): set it
    # with +techniques.pc_layer.experts=true.
    experts: bool = False
