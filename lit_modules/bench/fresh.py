"""A bench measurement in a fresh interpreter.

Forward-only rows read a few percent apart from one bench process to the next: the A/A control (one model
object timed against itself) read 1.025 [1.003, 1.048] late in a whole `make bench` and 1.002-1.010 in four
processes of its own, with the interval of each run far narrower than that spread (issue 27). A run's blocks
share whatever the process has accumulated (its allocator's state after a dozen Lightning fits, where the
tensors landed), so they cannot show it. `in_fresh_process` runs one repeat in a new interpreter (spawned,
not forked: nothing of the parent's heap comes along), and the rows take the spread of the repeats' medians
into their interval (`bench.verdict.Ratio.repeats`). A spawned child imports the caller's main module, so a
script that calls this needs the `if __name__ == "__main__":` guard (`python -m lit_modules.bench` has it).
"""

from __future__ import annotations

import multiprocessing
from typing import Any, Callable


def in_fresh_process(function: Callable[..., Any], *args: Any) -> Any:
    """function(*args) in a newly spawned interpreter; its result (picklable) comes back, its error is raised."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)
