"""WISCA's settings: which pairs (or LoRA's factor pairs) it balances, at what granularity, when, and what
happens to the optimizer state. The channel formulas, the reduce and the state policy are UNCONFIRMED
(see rescales.py and opt_state.py); the technique tags each choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from lit_modules.techniques.wisca.opt_state import OPT_STATE_POLICIES
from lit_modules.techniques.wisca.rescales import CHANNEL_REDUCES, GRANULARITIES
from lit_modules.typed_settings import Bound, OneOf

PAPER_PERIOD = 250
Granularity = Annotated[str, OneOf(GRANULARITIES)]


@dataclass
class WiscaSettings:
    qk: bool = True
    vo: bool = True
    qk_granularity: Granularity = "tensor"
    vo_granularity: Granularity = "tensor"
    every_n_steps: Annotated[int, Bound(ge=0, text=">= 0 (0 = never periodic)")] = PAPER_PERIOD
    at_init: bool = False  # once, right after initialization
    opt_state: Annotated[str, OneOf(OPT_STATE_POLICIES)] = "keep"
    channel_reduce: Annotated[str, OneOf(CHANNEL_REDUCES)] = "sum"  # over a KV group's query heads
    lora: bool = False  # balance LoRA's adapter factor pairs (B, A)
    lora_granularity: Granularity = "tensor"
