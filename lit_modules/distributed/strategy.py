"""The Lightning strategy a trainer config asks for: its name, except FSDP, which is made per block.

`trainer.strategy=fsdp` given to Lightning as a bare name makes the whole model one FSDP unit, so every
weight is gathered at once and only the resting state is sharded. One unit per transformer block (what
torchtitan and Lightning's own FSDP guide do) gathers one block at a time: the full-shard memory that
config/memory.py counts and the dry run plans.
"""

from __future__ import annotations

from typing import Any


def lightning_strategy(trainer_cfg: Any) -> Any:
    """`trainer.strategy` as Lightning's `strategy=` argument."""
    if trainer_cfg.strategy != "fsdp":
        return trainer_cfg.strategy
    from lightning.pytorch.strategies import FSDPStrategy

    from lit_modules.model.transformer import Block

    return FSDPStrategy(auto_wrap_policy={Block}, sharding_strategy="FULL_SHARD")
