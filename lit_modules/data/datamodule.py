"""LightningDataModule serving language-modelling windows from token shards.

Training is an endless stream of micro-batches whose content depends only on
(seed, step, rank layout) (see sampling.py), so runs are reproducible, DDP
layouts are equivalent, and a resumed run continues the exact stream. Validation
is a fixed set of evenly spaced, non-overlapping windows of the held-out split.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from lit_modules.errors import DataError

from .prefetch import pinned_loader_kwargs, prefetched
from .sampling import SAMPLERS, evenly_spaced_starts, micro_batch_sample_ids, permuted_window_starts, window_starts
from .shards import ShardSet

EPOCHS_METRIC = "data/epochs"  # tokens a run consumed / tokens of its training split, logged when fitting ends


class TrainWindowStream(IterableDataset):
    """Yields whole micro-batches (x, y), each LongTensor [batch_size, seq_len], forever."""

    def __init__(
        self,
        tokens: np.ndarray,
        seq_len: int,
        batch_size: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        accumulate: int = 1,
        start_micro_batch: int = 0,
        sampler: str = "random",
    ):
        super().__init__()
        n_starts = train_window_count(len(tokens), seq_len)
        self.tokens, self.seq_len, self.batch_size, self.seed = tokens, seq_len, batch_size, seed
        self.rank, self.world_size, self.accumulate = rank, world_size, accumulate
        self.start_micro_batch, self.n_starts, self.sampler = start_micro_batch, n_starts, sampler

    def batch(self, micro_batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        ids = micro_batch_sample_ids(
            micro_batch, self.batch_size, self.rank, self.world_size, self.accumulate
        )
        if self.sampler == "permutation":
            starts = permuted_window_starts(ids, self.seed, len(self.tokens), self.seq_len + 1)
        else:
            starts = window_starts(ids, self.seed, self.n_starts)
        windows = self.tokens[starts[:, None] + np.arange(self.seq_len + 1)].astype(np.int64)
        windows = torch.from_numpy(windows)
        return windows[:, :-1], windows[:, 1:]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        micro_batch = self.start_micro_batch
        while True:
            yield self.batch(micro_batch)
            micro_batch += 1


def train_window_count(n_tokens: int, seq_len: int) -> int:
    """Where a training window can start (it needs seq_len + 1 tokens); DataError if nowhere."""
    n_starts = n_tokens - seq_len
    if n_starts < 1:
        raise DataError(
            f"The training split has {n_tokens} tokens, too few for one window of {seq_len + 1}; "
            "lower data.seq_len."
        )
    return n_starts


def heldout_window_starts(n_tokens: int, seq_len: int, count: int) -> np.ndarray:
    """`count` non-overlapping validation window starts; DataError if the held-out split is too short."""
    starts = evenly_spaced_starts(n_tokens, seq_len + 1, count)
    if starts is None:
        raise DataError(
            f"The held-out split has {n_tokens} tokens, too few for {count} separate windows of "
            f"{seq_len + 1} (data.val_batches x data.batch_size); "
            "lower data.val_batches, data.batch_size or data.seq_len."
        )
    return starts


class HeldoutWindows(Dataset):
    """`count` fixed windows (x, y) spread evenly over the held-out tokens."""

    def __init__(self, tokens: np.ndarray, seq_len: int, count: int):
        starts = heldout_window_starts(len(tokens), seq_len, count)
        self.tokens, self.seq_len, self.starts = tokens, seq_len, starts

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = int(self.starts[index])
        window = torch.from_numpy(self.tokens[start : start + self.seq_len + 1].astype(np.int64))
        return window[:-1], window[1:]


class LMDataModule(L.LightningDataModule):
    def __init__(
        self,
        shards: ShardSet,
        seq_len: int,
        batch_size: int,
        seed: int,
        accumulate_grad_batches: int = 1,
        val_batches: int = 8,
        sampler: str = "random",
    ):
        super().__init__()
        if sampler not in SAMPLERS:
            raise DataError(f"data.sampler is {sampler!r} but must be one of {', '.join(SAMPLERS)}.")
        self.shards = shards
        self.seq_len, self.batch_size, self.seed = seq_len, batch_size, seed
        self.accumulate_grad_batches, self.val_batches, self.sampler = accumulate_grad_batches, val_batches, sampler
        # From the shard sizes alone, so a split too short for these settings is refused before a run opens.
        train_window_count(shards.n_tokens("train"), seq_len)
        heldout_window_starts(shards.n_tokens("heldout"), seq_len, val_batches * batch_size)

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        # Tensors already where they go (training on CPU) stay as they are: Lightning's generic walk over the
        # collection costs about what sampling the batch does.
        if isinstance(batch, (tuple, list)) and all(isinstance(t, torch.Tensor) and t.device == device for t in batch):
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    # --- layout -------------------------------------------------------------------------------
    def _rank_and_world(self) -> tuple[int, int]:
        trainer = self._attached_trainer()
        return (trainer.global_rank, trainer.world_size) if trainer is not None else (0, 1)

    def _attached_trainer(self):
        return getattr(self, "trainer", None)

    def tokens_per_step(self, world_size: int | None = None) -> int:
        """Training tokens consumed per optimizer step across all ranks."""
        world_size = world_size if world_size is not None else self._rank_and_world()[1]
        return self.seq_len * self.batch_size * world_size * self.accumulate_grad_batches

    @property
    def bytes_per_token(self) -> float:
        """Held-out UTF-8 bytes per token: bits/byte = loss_nats / ln(2) / bytes_per_token."""
        return self.shards.bytes_per_token("heldout")

    @property
    def vocab_size(self) -> int:
        return self.shards.vocab_size

    # --- dataloaders --------------------------------------------------------------------------
    def train_stream(self, start_step: int = 0, rank: int = 0, world_size: int = 1) -> TrainWindowStream:
        return TrainWindowStream(
            self.shards.train_tokens(),
            self.seq_len,
            self.batch_size,
            self.seed,
            rank=rank,
            world_size=world_size,
            accumulate=self.accumulate_grad_batches,
            start_micro_batch=start_step * self.accumulate_grad_batches,
            sampler=self.sampler,
        )

    def train_batches(self, batch_size: int, first: int, count: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """`count` micro-batches of `batch_size` training windows from micro-batch `first` on: the training
        corpus, seed and window sampler (one stream, no rank or accumulation split), e.g. for a measurement on
        windows a run never reads."""
        stream = TrainWindowStream(self.shards.train_tokens(), self.seq_len, batch_size, self.seed, sampler=self.sampler)
        return [stream.batch(first + k) for k in range(count)]

    def train_dataloader(self, start_step: int | None = None) -> DataLoader:
        """Starts at the trainer's global_step, which Lightning restores before building loaders on resume."""
        trainer = self._attached_trainer()
        if start_step is None:
            start_step = trainer.global_step if trainer is not None else 0
        rank, world_size = self._rank_and_world()
        # batch_size=None: the dataset already yields whole micro-batches; on CUDA read ahead into pinned memory.
        stream = prefetched(self.train_stream(start_step, rank, world_size), trainer)
        return DataLoader(stream, batch_size=None, num_workers=0)

    def val_dataset(self) -> HeldoutWindows:
        return HeldoutWindows(self.shards.heldout_tokens(), self.seq_len, self.val_batches * self.batch_size)

    def val_dataloader(self) -> DataLoader:
        # A plain map-style loader, so Lightning can insert a DistributedSampler under DDP.
        return DataLoader(self.val_dataset(), batch_size=self.batch_size, shuffle=False, num_workers=0,
                          **pinned_loader_kwargs(self._attached_trainer()))

    # --- how much of the data a run read -------------------------------------------------------
    def epochs_read(self, steps: int, world_size: int = 1) -> float:
        """Training tokens consumed in `steps` optimizer steps over the tokens of the training split."""
        return steps * self.tokens_per_step(world_size) / self.shards.n_tokens("train")

    def teardown(self, stage: str) -> None:
        """When fitting ends, `data/epochs` goes to the run's logger (rank 0): above 1.0 the run read some
        training tokens more than once, whatever the sampler."""
        if stage == "fit":
            self._log_epochs()

    def on_exception(self, exception: BaseException) -> None:
        """A fit stopped by an interrupt or an error skips teardown; its run logs what it read up to there."""
        trainer = self._attached_trainer()
        if trainer is not None and trainer.state.fn == "fit":
            self._log_epochs()

    def _log_epochs(self) -> None:
        trainer = self._attached_trainer()
        if trainer is None or trainer.logger is None or not trainer.is_global_zero:
            return
        steps = trainer.global_step
        trainer.logger.log_metrics({EPOCHS_METRIC: self.epochs_read(steps, trainer.world_size)},
                                   step=max(steps - 1, 0))

    # --- checkpoint state ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "seed": self.seed,
            "seq_len": self.seq_len,
            "shards_key": self.shards.key,
            "corpus_fingerprint": self.shards.manifest["corpus"]["fingerprint"],
            "tokenizer_fingerprint": self.shards.manifest["tokenizer"]["fingerprint"],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Refuse to resume on different data: the step-indexed stream would no longer match."""
        current = self.state_dict()
        for key in ("corpus_fingerprint", "tokenizer_fingerprint", "seed", "seq_len"):
            if key in state_dict and state_dict[key] != current[key]:
                raise DataError(
                    f"The checkpoint was trained with {key.replace('_', ' ')} {state_dict[key]} "
                    f"but this run has {current[key]}; resume with the same data settings "
                    "or start a fresh run."
                )
