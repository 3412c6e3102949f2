"""Training batches read ahead into pinned host memory, for a GPU step that never waits on its input.

On a CUDA device the training stream is wrapped in `PinnedPrefetch`: a background thread samples the next
`depth` micro-batches and copies each into page-locked memory while the GPU runs the current step, and
Lightning moves a batch with `non_blocking=True` (its default for CUDA), which from pinned memory is an
asynchronous copy on the stream instead of a host-side staging copy that blocks the launching thread. The
batches and their order are the stream's own, so a run's data is the same with or without it. On the CPU
nothing is wrapped (`pinned_loader_kwargs` and `prefetched` change nothing there).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from torch.utils.data import IterableDataset

PREFETCH_DEPTH = 4  # micro-batches read ahead: a few steps of slack, a few MB of pinned memory at seq 1024
_POLL_S = 0.1  # how often a blocked producer checks whether the consumer has gone


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


class PinnedPrefetch(IterableDataset):
    """Yields `stream`'s items (tuples of tensors) in order, read `depth` ahead by a thread, pinned if `pin`."""

    def __init__(self, stream: Iterable[Any], depth: int = PREFETCH_DEPTH, pin: bool = True):
        super().__init__()
        self.stream, self.depth, self.pin = stream, depth, pin

    def __iter__(self) -> Iterator[Any]:
        ready: queue.Queue = queue.Queue(maxsize=self.depth)
        stop = threading.Event()

        def offer(item: Any) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=_POLL_S)
                    return True
                except queue.Full:
                    continue
            return False

        def produce() -> None:
            try:
                for batch in self.stream:
                    if self.pin:
                        batch = tuple(t.pin_memory() for t in batch)
                    if not offer(batch):
                        return
            except BaseException as error:  # noqa: BLE001 - raised again in the consuming thread
                offer(_Failed(error))

        thread = threading.Thread(target=produce, name="batch-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = ready.get()
                if isinstance(item, _Failed):
                    raise item.error
                yield item
        finally:  # the loader was dropped (end of fit) or failed: the producer stops within _POLL_S
            stop.set()


def on_cuda(trainer: Any) -> bool:
    """Whether `trainer` (None outside a fit) trains on a CUDA device."""
    return trainer is not None and trainer.strategy.root_device.type == "cuda"


def prefetched(stream: Iterable[Any], trainer: Any) -> Iterable[Any]:
    """`stream` read ahead into pinned memory when training on CUDA; `stream` itself otherwise."""
    return PinnedPrefetch(stream, pin=torch.cuda.is_available()) if on_cuda(trainer) else stream


def pinned_loader_kwargs(trainer: Any) -> dict[str, bool]:
    """DataLoader arguments for a map-style loader (validation): pinned batches on CUDA, nothing on the CPU."""
    return {"pin_memory": True} if on_cuda(trainer) else {}
