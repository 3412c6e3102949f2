"""Per-block activation checkpointing (`trainer.activation_checkpointing=true`): each block keeps only its input
and recomputes the rest during the backward pass, trading ~1/3 more block compute for activation memory
(config/memory.py counts both ways; the dry run plans both).

Applied from outside the model: each block's `forward` is replaced, on the instance, by a checkpointed call of
its class's own forward. The module tree, parameter names, state dicts and checkpoints stay those of the plain
model (torch's checkpoint_wrapper would rename every parameter). Non-reentrant torch.utils.checkpoint, which
torch.compile traces and which runs inside an FSDP unit (FSDP wraps each block: distributed/strategy.py).
"""

from __future__ import annotations

from torch import nn
from torch.utils.checkpoint import checkpoint

from lit_modules.model.transformer import Block


class CheckpointedForward:
    """`block.forward` under checkpointing; a plain forward where no gradient is wanted (eval, diagnostics)."""

    def __init__(self, block: nn.Module) -> None:
        self.block = block  # a cycle through the instance dict: copy.deepcopy keeps it pointing at the copy

    def __call__(self, *args, **kwargs):
        import torch

        forward = type(self.block).forward
        if not torch.is_grad_enabled():
            return forward(self.block, *args, **kwargs)
        return checkpoint(forward, self.block, *args, use_reentrant=False, **kwargs)


def checkpoint_blocks(model: nn.Module) -> int:
    """Checkpoint every transformer block of `model` in place; returns how many (0: nothing to checkpoint)."""
    blocks = [m for m in model.modules() if isinstance(m, Block)]
    for block in blocks:
        block.forward = CheckpointedForward(block)
    return len(blocks)
