"""Throughput of the batched adapter against scoring one request at a time, on the same model.

`bench_adapter(model, tokenizer, n_requests)` -> {"batched_rps", "single_rps", "ratio", ...}; `make bench`
can print it. Requests are cloze-shaped (a passage and its next word) cut from a fixed text, so the numbers
do not depend on any corpus being prepared.
"""

from __future__ import annotations

import random
import time
from typing import Optional

from lm_eval.api.instance import Instance

from .adapter import LiveLM

_TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair, we had "
    "everything before us, we had nothing before us, we were all going direct to Heaven, we were all going "
    "direct the other way. "
)


def bench_requests(n_requests: int, seed: int = 0, text: Optional[str] = None) -> list[Instance]:
    """Loglikelihood requests with contexts of 20..600 characters, reproducible from `seed`."""
    text = (text or _TEXT) * 4
    rng = random.Random(seed)
    requests = []
    for index in range(n_requests):
        end = rng.randrange(20, min(600, len(text) - 20))
        end = text.rfind(" ", 0, end) + 1 or end
        word_end = text.find(" ", end)
        requests.append(Instance("loglikelihood", {}, (text[:end][-600:], text[end:word_end]), index))
    return requests


def _rate(lm: LiveLM, requests: list[Instance], one_by_one: bool) -> float:
    started = time.perf_counter()
    if one_by_one:
        for request in requests:
            lm.loglikelihood([request])
    else:
        lm.loglikelihood(requests)
    return len(requests) / (time.perf_counter() - started)


def bench_adapter(
    model, tokenizer, n_requests: int = 256, batch_size: int = 16, device: str = "auto", repeats: int = 2
) -> dict[str, float]:
    """Requests per second, batched (sorted by length, `batch_size` per forward) and one at a time."""
    requests = bench_requests(n_requests)
    batched = LiveLM(model, tokenizer, batch_size=batch_size, device=device)
    single = LiveLM(model, tokenizer, batch_size=1, device=device)
    batched.loglikelihood(requests[:batch_size])  # warm-up: first-call allocations and kernel choice
    batched_rps = max(_rate(batched, requests, one_by_one=False) for _ in range(repeats))
    single_rps = max(_rate(single, requests, one_by_one=True) for _ in range(repeats))
    return {
        "batched_rps": batched_rps,
        "single_rps": single_rps,
        "ratio": batched_rps / single_rps,
        "n_requests": float(n_requests),
        "batch_size": float(batch_size),
    }
