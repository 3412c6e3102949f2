"""A bench measurement in a fresh interpreter.

Forward-only rows read apart from one bench process to the next: the A/A control (one model object timed
against itself) read 1.17 in two of four processes and 1.00 in the other two, with the interval of each
run far narrower than that spread. The cause was the heap: with glibc's defaults whether a
block's activations are fresh pages (faulted in, zeroed by the kernel) or reused ones depends on the
process's history; `steady_heap` (which every training run and the bench now set) took the four A/A
medians to 0.997-1.006. A run's blocks share that history, so they cannot show such a spread:
`in_fresh_process` still runs each repeat in a new interpreter (spawned, not forked: nothing of the
parent's heap comes along), and the rows take the spread of the repeats' medians into their interval
(`bench.verdict.Ratio.repeats`). A spawned child imports the caller's main module, so a script that calls
this needs the `if __name__ == "__main__":` guard (`python -m lit_modules.bench` has it).
"""

from __future__ import annotations

import multiprocessing
from typing import Any, Callable


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """function(*args) in a newly spawned interpreter; its result (picklable) comes back, its error is raised."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)
