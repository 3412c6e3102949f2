"""Throughput of the batched adapter against scoring one request at a time, on the same model.

`bench_adapter(model, tokenizer, n_requests)` -> {"batched_rps", "single_rps", "ratio", "ratios", "identical",
...}; `make bench` reports its per-repeat ratios. Requests are cloze-shaped (a passage and its next word) cut from a fixed text, so the numbers
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


def _seconds(lm: LiveLM, requests: list[Instance], one_by_one: bool) -> tuple[float, list]:
    started = time.perf_counter()
    if one_by_one:
        scores = [lm.loglikelihood([request])[0] for request in requests]
    else:
        scores = lm.loglikelihood(requests)
    return time.perf_counter() - started, scores


def bench_adapter(
    model, tokenizer, n_requests: int = 256, batch_size: int = 16, device: str = "auto", repeats: int = 2
) -> dict:
    """Requests per second, batched (`batch_size` per forward) and one at a time, measured back to back in
    every repeat; `ratios` holds each repeat's batched-over-single speed, `identical` whether the two
    gave the same scores bit for bit (they must: a faster path that scores differently is no speed-up)."""
    requests = bench_requests(n_requests)
    batched = LiveLM(model, tokenizer, batch_size=batch_size, device=device)
    single = LiveLM(model, tokenizer, batch_size=1, device=device)
    batched.loglikelihood(requests[:batch_size])  # warm-up: first-call allocations and kernel choice
    batched_s, single_s, identical = [], [], True
    for _ in range(repeats):
        seconds, batched_scores = _seconds(batched, requests, one_by_one=False)
        batched_s.append(seconds)
        seconds, single_scores = _seconds(single, requests, one_by_one=True)
        single_s.append(seconds)
        identical = identical and batched_scores == single_scores
    ratios = [s / b for s, b in zip(single_s, batched_s)]
    return {
        "batched_rps": n_requests / min(batched_s),
        "single_rps": n_requests / min(single_s),
        "ratio": sorted(ratios)[len(ratios) // 2],
        "ratios": ratios,
        "identical": identical,
        "n_requests": float(n_requests),
        "batch_size": float(batch_size),
    }
