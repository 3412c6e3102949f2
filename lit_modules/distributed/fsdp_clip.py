"""Gradient clipping by norm under FSDP: the whole model's norm, from the root FSDP module.

Under FSDP every rank holds one shard of each gradient, so `torch.nn.utils.clip_grad_norm_` over a rank's
parameters would clip by the norm of its shard; Lightning's FSDP precision plugin therefore refuses norm
clipping outright (`gradient_clip_algorithm='norm' is currently not supported`), which stopped
`trainer=fsdp` at its first step under the default `optim.grad_clip=1.0`. The root FSDP module's own
`clip_grad_norm_` (torch's public API) all-reduces the shards' squared norms and scales every shard by the
same factor: the clip a single process would apply to the unsharded gradients.
"""

from __future__ import annotations

from typing import Any


def clip_sharded_grad_norm(root: Any, max_norm: float) -> bool:
    """Clip `root`'s gradients to `max_norm` by the norm over every rank's shards when `root` is an FSDP module
    (the strategy's wrapped model); False, touching nothing, for any other module."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    if not isinstance(root, FullyShardedDataParallel):
        return False
    root.clip_grad_norm_(max_norm)  # no host read: the scale is applied on the device
    return True
