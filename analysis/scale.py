"""Where a comparison holds: our runs' size and budget, the paper's tokens per parameter, and the words for them.

A run is at *matched scale* when its TPP (tokens per non-embedding parameter) is at least MATCHED_TPP (20,
compute-optimal), or at least the paper's own TPP where the paper trained shorter than that. Parameters
are scaled down from the paper's, never the TPP. Every verdict states the scale it holds at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MATCHED_TPP = 20.0  # compute-optimal tokens per non-embedding parameter
TPP_ROUNDING = 0.005  # budgets are whole optimizer steps: 20 TPP of tiny is 1,043 steps = 19.998 TPP


@dataclass(frozen=True)
class Scale:
    """Where a comparison holds: our runs' size and budget (one variant), and the paper's TPP."""

    params_total: float
    params_non_embedding: float
    tokens: float
    paper_tpp: float | None = None
    variant: str = ""

    @property
    def tpp(self) -> float:
        ok = math.isfinite(self.params_non_embedding) and self.params_non_embedding > 0
        return self.tokens / self.params_non_embedding if ok else float("nan")

    @property
    def matched_tpp(self) -> float:
        """The TPP a run needs to be at matched scale."""
        return min(MATCHED_TPP, self.paper_tpp) if self.paper_tpp else MATCHED_TPP

    @property
    def matched(self) -> bool:
        return math.isfinite(self.tpp) and self.tpp >= self.matched_tpp * (1 - TPP_ROUNDING)

    def describe(self, seeds: int | None = None) -> str:
        ours = (f"{count(self.params_non_embedding)} non-embedding params ({count(self.params_total)} total), "
                f"{count(self.tokens)} tokens = {number(self.tpp)} TPP")
        if seeds is not None:
            ours += f", {seeds} paired seeds"
        if self.variant:
            ours += f", variant `{self.variant}`"
        paper = f"the paper's ~{number(self.paper_tpp)} TPP" if self.paper_tpp else "the paper's TPP unknown"
        where = "matched scale" if self.matched else "below matched scale"
        return f"scale: ours {ours}; {paper}; {where} (needs >= {number(self.matched_tpp)} TPP)"


def count(x: float) -> str:
    """A parameter or token count in a few characters: 106,816 -> 107k, 2.1e6 -> 2.1M."""
    if x is None or not math.isfinite(x):
        return "?"
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.3g}"


def number(x: float | None) -> str:
    return "?" if x is None or not math.isfinite(x) else f"{x:.3g}"
