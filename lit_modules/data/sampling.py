"""Which training windows each rank reads at each step: a pure function of (seed, sample id).

Global sample ids are laid out by optimizer step. With
G = batch_size * world_size * accumulate_grad_batches samples per step, micro-batch
`a` of step `s` on rank `r` takes ids

    s*G + a*(world_size*batch_size) + r*batch_size + [0, batch_size).

So every optimizer step consumes exactly the ids [s*G, (s+1)*G) however they are
divided between ranks and accumulation: 1 process with batch 2B and 2 ranks with
batch B see the same samples per step, and resuming at step s needs nothing but s.
Sample id i reads the window starting at splitmix64(mix(seed) + i) mod n_starts (`data.sampler=random`, the
default: windows drawn with replacement); `data.sampler=permutation` reads them without (below).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from lit_modules.config.data import SAMPLERS  # noqa: F401 - the datamodule's check reads it here

from .hashing import splitmix64


def micro_batch_sample_ids(
    micro_batch: int, batch_size: int, rank: int, world_size: int, accumulate: int
) -> np.ndarray:
    """Global sample ids of one rank's `micro_batch`-th micro-batch (counted from step 0)."""
    step, slot = divmod(micro_batch, accumulate)
    samples_per_step = batch_size * world_size * accumulate
    first = step * samples_per_step + slot * world_size * batch_size + rank * batch_size
    return np.arange(first, first + batch_size, dtype=np.uint64)


def window_starts(sample_ids: np.ndarray, seed: int, n_starts: int) -> np.ndarray:
    """Start offset of each sample's window, uniform over [0, n_starts)."""
    seed_key = splitmix64(np.array([seed % 2**64], dtype=np.uint64))
    hashed = splitmix64(np.asarray(sample_ids, dtype=np.uint64) + seed_key)  # wraps mod 2**64
    return (hashed % np.uint64(n_starts)).astype(np.int64)


def evenly_spaced_starts(n_tokens: int, window: int, count: int) -> np.ndarray | None:
    """`count` non-overlapping window starts from the first to the last token; None if they do not fit."""
    last_start = n_tokens - window
    if count < 1 or last_start < 0 or (count - 1) * window > last_start:
        return None
    if count == 1:
        return np.zeros(1, dtype=np.int64)
    return (np.arange(count, dtype=np.int64) * last_start) // (count - 1)


# --- without replacement --------------------------------------------------------------------------------------
# `data.sampler=permutation`: the training split is cut into disjoint windows of seq_len + 1 tokens (from an
# offset drawn from the seed, so seeds differ in where windows begin), and sample id i reads window
# perm_e(i mod W) of epoch e = i // W, where W is the number of windows and perm_e a permutation drawn from
# (seed, e). Within an epoch no token is read twice; `data/epochs` says how many epochs a run read.


def disjoint_window_layout(n_tokens: int, window: int, seed: int) -> tuple[int, int]:
    """(offset of the first window, number of disjoint windows) of a split; the offset is below `window`."""
    seed_key = splitmix64(np.array([seed % 2**64], dtype=np.uint64))
    offset = int(seed_key[0] % np.uint64(window))
    if n_tokens - offset < window:
        offset = 0
    return offset, (n_tokens - offset) // window


@lru_cache(maxsize=2)  # the epoch being read and, across its boundary, the next
def _epoch_permutation(seed: int, epoch: int, n_windows: int) -> np.ndarray:
    return np.random.Generator(np.random.PCG64([seed % 2**63, epoch])).permutation(n_windows)


def permuted_window_starts(sample_ids: np.ndarray, seed: int, n_tokens: int, window: int) -> np.ndarray:
    """Start offset of each sample's window when windows are read without replacement (see above)."""
    offset, n_windows = disjoint_window_layout(n_tokens, window, seed)
    ids = np.asarray(sample_ids, dtype=np.int64)
    epochs, positions = np.divmod(ids, n_windows)
    starts = np.empty(len(ids), dtype=np.int64)
    for epoch in np.unique(epochs):
        chosen = epochs == epoch
        starts[chosen] = _epoch_permutation(seed, int(epoch), n_windows)[positions[chosen]]
    return offset + starts * window
