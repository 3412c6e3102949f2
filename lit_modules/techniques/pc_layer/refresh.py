"""The PC layer's streaming power iteration as a Lightning callback.

Official schedule (`train.py` of the release): once before training, then after every optimizer step
(`power_iters` warm-started iterations each time). Here:

- `on_train_start`: at step 0 a full refresh; on resume only a repair of invalid buffers, because the
  checkpoint already holds the u, v refreshed after its last step (a full refresh would make a resumed
  run differ from an uninterrupted one).
- `on_train_batch_end`: Lightning calls it after every micro-batch; a refresh (one batched power iteration
  per shape group, no host synchronisation) runs only when
  `trainer.global_step` moved, i.e. once per optimizer step, also with gradient accumulation. This
  callback is registered before the checkpoint callback, so a checkpoint holds the refreshed u, v.

Distributed: every rank holds the same weights and runs the same deterministic iteration, so the
buffers agree; when torch.distributed is initialized they are also broadcast from rank 0 (as the
release does), which guards against kernel nondeterminism. DDP's default `broadcast_buffers` would
sync them at the next forward anyway. FSDP is refused by the technique (sharded weights).
"""

from __future__ import annotations

import lightning as L
import torch
import torch.distributed as dist

from lit_modules.techniques.pc_layer.parametrization import pc_modules, refresh_all


class PowerIterationRefresh(L.Callback):
    def __init__(self, power_iters: int = 10):
        self.power_iters = power_iters
        self._last_step: int | None = None

    def _refresh(self, pl_module: L.LightningModule, only_invalid: bool = False, repair: bool = True) -> None:
        refresh_all(pl_module, self.power_iters, only_invalid=only_invalid, repair=repair)
        broadcast_from_rank0(pl_module)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._refresh(pl_module, only_invalid=trainer.global_step > 0)
        self._last_step = trainer.global_step

    def on_after_backward(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # The shape groups' effective weights were kept through the backward (for checkpointed blocks'
        # recomputation); they are not needed any more, and would hold their memory through the optimizer step.
        for _, _, pc in pc_modules(pl_module):
            pc.release()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if trainer.global_step != self._last_step:  # an optimizer step has just happened
            # No repair: its validity screen reads values on the host (a device sync every step), and the
            # buffers were made valid at train start; a step cannot invalidate them.
            self._refresh(pl_module, repair=False)
            self._last_step = trainer.global_step


@torch.no_grad()
def broadcast_from_rank0(model: torch.nn.Module) -> None:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    for _, _, pc in pc_modules(model):
        dist.broadcast(pc.u, src=0)
        dist.broadcast(pc.v, src=0)
