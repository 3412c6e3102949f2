"""The compute time a paper's evidence has taken so far, across the calls that ran its cells."""

from __future__ import annotations

import os
from pathlib import Path


class WallClock:
    """The compute time a paper's evidence has taken so far, kept in the store's folder across calls.

    Every call that runs cells adds its time, also when it is stopped or crashes, so a protocol finished
    over several calls reports the sum of them (a killed first call is not lost); a fresh grid starts at 0.
    """

    def __init__(self, runs_dir: str, paper: str):
        self.path = Path(runs_dir) / "evidence" / f"{paper}.wall_s"

    def total(self) -> float:
        try:
            return float(self.path.read_text())
        except (OSError, ValueError):
            return 0.0

    def reset(self) -> None:
        self.path.unlink(missing_ok=True)

    def add(self, seconds: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        tmp.write_text(repr(self.total() + seconds))
        tmp.replace(self.path)
