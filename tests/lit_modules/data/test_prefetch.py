"""The read-ahead of training batches: the same batches in the same order, errors surface, the thread ends
with the loader, and nothing is wrapped or pinned on the CPU."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from lit_modules.data.datamodule import TrainWindowStream
from lit_modules.data.prefetch import PinnedPrefetch, pinned_loader_kwargs, prefetched


def _stream() -> TrainWindowStream:
    tokens = np.arange(5_000, dtype=np.uint16) % 251
    return TrainWindowStream(tokens, seq_len=16, batch_size=4, seed=3, start_micro_batch=7)


def _trainer(device: str) -> SimpleNamespace:
    return SimpleNamespace(strategy=SimpleNamespace(root_device=torch.device(device)))


def test_the_same_batches_in_the_same_order() -> None:
    direct, ahead = iter(_stream()), iter(PinnedPrefetch(_stream(), depth=3, pin=False))
    for _ in range(25):
        (x, y), (x2, y2) = next(direct), next(ahead)
        assert torch.equal(x, x2) and torch.equal(y, y2)


def test_a_failing_stream_fails_the_consumer() -> None:
    def broken():
        yield (torch.zeros(2),)
        raise ValueError("shard unreadable")

    batches = iter(PinnedPrefetch(broken(), pin=False))
    assert torch.equal(next(batches)[0], torch.zeros(2))
    with pytest.raises(ValueError, match="shard unreadable"):
        next(batches)


def test_the_thread_ends_with_the_loader() -> None:
    # This loader's own thread, not a count of all: another test's producer may still be winding down.
    before = set(threading.enumerate())
    batches = iter(PinnedPrefetch(_stream(), depth=2, pin=False))
    next(batches)
    (thread,) = [t for t in threading.enumerate() if t not in before and t.name == "batch-prefetch"]
    batches.close()  # what dropping the loader's iterator does at the end of a fit
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_only_a_cuda_trainer_gets_read_ahead_and_pinned_batches() -> None:
    stream = _stream()
    assert prefetched(stream, None) is stream and prefetched(stream, _trainer("cpu")) is stream
    assert pinned_loader_kwargs(None) == {} and pinned_loader_kwargs(_trainer("cpu")) == {}
    on_gpu = prefetched(stream, _trainer("cuda"))
    assert isinstance(on_gpu, PinnedPrefetch) and on_gpu.stream is stream
    assert on_gpu.pin == torch.cuda.is_available()  # pinning needs the CUDA runtime
    assert pinned_loader_kwargs(_trainer("cuda")) == {"pin_memory": True}
