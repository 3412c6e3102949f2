"""A global batch in tokens (`trainer.global_batch_tokens`) -> the gradient accumulation that gives it.

A recipe states its batch the way papers do, in tokens per optimizer step (GPT-3's 0.5M, 1M); the micro-batch
is what fits one device. Accumulation = global / (micro-batch x seq_len x devices x nodes), so the same recipe
keeps its batch, and with it its learning rate and warmup, on one GPU or on a node of eight.
"""

from __future__ import annotations

from omegaconf import DictConfig

from lit_modules.config.budget import world_size


def derive_accumulation(cfg: DictConfig) -> list[str]:
    """Set `trainer.accumulate_grad_batches` from `trainer.global_batch_tokens` (in place); one sentence per
    problem. Nothing happens when no global batch is set."""
    t, d = cfg.trainer, cfg.data
    target = t.global_batch_tokens
    if target is None or d.batch_size < 1 or d.seq_len < 2 or t.devices < 1 or t.num_nodes < 1:
        return []  # unset, or another check already names the impossible value
    world = world_size(cfg)
    micro = d.batch_size * d.seq_len * world  # tokens of one micro-batch on every device
    if target < 1 or target % micro:
        return [_indivisible(target, d.batch_size, d.seq_len, world)]
    accumulation = target // micro
    if t.accumulate_grad_batches not in (1, accumulation):
        return [f"trainer.accumulate_grad_batches={t.accumulate_grad_batches} contradicts trainer.global_batch_tokens="
                f"{target:,}, which needs {accumulation} ({d.batch_size} x {d.seq_len} tokens x {_devices(world)} per "
                "micro-batch); drop one of them (trainer.global_batch_tokens=null keeps your accumulation)."]
    t.accumulate_grad_batches = accumulation
    return []


def _indivisible(target: int, batch: int, seq_len: int, world: int) -> str:
    fits = next((b for b in range(batch - 1, 0, -1) if target % (b * seq_len * world) == 0), None)
    sequences = target // (batch * seq_len) if target % (batch * seq_len) == 0 else None
    counts = [n for n in range(1, 2 * world + 1) if sequences and sequences % n == 0]
    if fits is not None:
        fix = f"use data.batch_size={fits}"
    elif counts:
        fix = f"use a device count that divides {sequences} micro-batches (e.g. {' or '.join(map(str, counts[-2:]))})"
    else:
        fix = "set trainer.global_batch_tokens to a multiple of the micro-batch"
    return (f"trainer.global_batch_tokens={target:,} is not a whole number of micro-batches of {batch} x {seq_len} "
            f"tokens on {_devices(world)} ({batch * seq_len * world:,} tokens); {fix}.")


def _devices(n: int) -> str:
    return f"{n} device" if n == 1 else f"{n} devices"
