"""Packed cells: the aggregate tokens/s of k small cells training at once on one device (k = 1, 2, 4, 8).

What `cells_per_device=k` buys (sweeps/cell_placement.py): each cell is a process of its own on the same
device, as the device-cells launcher starts them. Every process runs the platform's training path
(bench/gpu_fit.py) for `warmup` steps, waits at a barrier until all k are warm, then trains `steps` timed
steps; the aggregate is all processes' timed tokens over the span from the first window's start to the last
one's end. The gain over k = 1 is how much of the device one small cell leaves idle.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import time
from typing import Any

BARRIER_TIMEOUT_S = 300.0


def _cell(overrides: list[str], warmup: int, steps: int, barrier: Any, results: Any) -> None:
    """One packed cell (a spawned process): warm up, meet the others, train the timed window."""
    from lit_modules.bench.gpu_fit import gpu_fit
    from lit_modules.steady_heap import steady_heap

    steady_heap()

    def meet(step: int) -> None:
        if step == warmup:
            barrier.wait(timeout=BARRIER_TIMEOUT_S)

    try:
        timing = gpu_fit(overrides, steps, warmup, hook=meet)
        results.put({"start": timing.window[0], "end": timing.window[1], "tokens": steps * timing.tokens_per_step,
                     "tokens_per_s": timing.tokens_per_step / timing.seconds_per_step})
    except BaseException as err:  # noqa: BLE001 - reported by the parent, which must not wait forever
        barrier.abort()
        results.put({"error": f"{type(err).__name__}: {err}"})


def packed_throughput(overrides: list[str], k: int, warmup: int, steps: int, timeout_s: float = 600.0) -> dict:
    """k cells of `overrides` at once: aggregate tokens/s and each cell's own."""
    context = mp.get_context("spawn")  # a fresh process per cell, as the launcher starts them (CUDA-safe)
    barrier, results = context.Barrier(k), context.Queue()
    procs = [context.Process(target=_cell, args=(overrides, warmup, steps, barrier, results), daemon=True)
             for _ in range(k)]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    rows = []
    try:
        while len(rows) < k:
            rows.append(results.get(timeout=max(1.0, timeout_s - (time.perf_counter() - started))))
    except queue.Empty:
        rows.append({"error": f"timed out after {timeout_s:.0f} s"})
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    errors = [r["error"] for r in rows if "error" in r]
    if errors:
        return {"cells": k, "error": errors[0]}
    span = max(r["end"] for r in rows) - min(r["start"] for r in rows)
    return {"cells": k, "aggregate_tokens_per_s": sum(r["tokens"] for r in rows) / span,
            "per_cell_tokens_per_s": sorted(r["tokens_per_s"] for r in rows), "span_s": span,
            "wall_s": time.perf_counter() - started}


def packed_rows(overrides: list[str], ks: tuple[int, ...], warmup: int, steps: int, deadline: float) -> dict:
    """One row per k, with each k's gain over one cell; stops (and says so) when the deadline (perf_counter)
    would be passed."""
    rows: list[dict] = []
    for k in ks:
        left = deadline - time.perf_counter()
        if left < 30:
            rows.append({"cells": k, "skipped": "the check's time budget is spent"})
            continue
        rows.append(packed_throughput(overrides, k, warmup, steps, timeout_s=left))
    one = next((r.get("aggregate_tokens_per_s") for r in rows if r["cells"] == 1), None)
    for row in rows:
        if one and "aggregate_tokens_per_s" in row:
            row["vs_one_cell"] = row["aggregate_tokens_per_s"] / one
    return {"overrides": overrides, "warmup": warmup, "steps": steps, "rows": rows}
