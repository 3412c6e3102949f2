"""From repeated timings to a ratio the bench can stand behind, or a loud "noisy".

A ratio is measured once per repeat, with its two sides run back to back inside that repeat (see
`alternate`), so a neighbour who slows the machine for a minute slows both sides of the same repeat.
Across repeats we report min / median / max and call the ratio **noisy** when

- the repeats disagree: (max - min) / median > `tolerance` (10 %), or
- it is physically implausible: beyond the noise (the repeats' own spread, at least `floor`) it lies
  on the wrong side of a bound the work itself sets, e.g. a step that does *more* computation than the
  baseline measured faster than the baseline (`at_least=1`), or two workers on two cores more than 2x
  faster than one (`at_most=2`).

A noisy ratio is still written (its median), and named in `noisy`; `--strict` makes the bench fail on it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

TOLERANCE = 0.10  # repeats that disagree by more than this are not one measurement
FLOOR = 0.02  # the least noise we assume: two honest repeats rarely agree better on a shared machine


@dataclass(frozen=True)
class Ratio:
    """One measured quantity, one value per repeat; `at_least` / `at_most`: what the work allows."""

    key: str
    per_repeat: tuple[float, ...]
    at_least: float | None = None
    at_most: float | None = None
    tolerance: float = TOLERANCE
    floor: float = FLOOR
    notes: tuple[str, ...] = ()  # problems the measurement itself found (e.g. results that disagree)

    def __post_init__(self) -> None:
        if not self.per_repeat:
            raise ValueError(f"{self.key}: no repeat was measured")

    @property
    def min(self) -> float:
        return min(self.per_repeat)

    @property
    def max(self) -> float:
        return max(self.per_repeat)

    @property
    def median(self) -> float:
        return statistics.median(self.per_repeat)

    @property
    def spread(self) -> float:
        """(max - min) / median: how far the repeats disagree, relative."""
        return (self.max - self.min) / abs(self.median) if self.median else float("inf")

    def problems(self) -> list[str]:
        """Why this ratio is not to be trusted; empty when it is."""
        found = list(self.notes)
        if len(self.per_repeat) < 2:
            found.append("one repeat: its noise is unknown")
        elif self.spread > self.tolerance:
            found.append(f"repeats disagree by {self.spread:.0%} (> {self.tolerance:.0%})")
        margin = max(self.max - self.min, self.floor * abs(self.median))
        if self.at_least is not None and self.median < self.at_least - margin:
            found.append(f"implausible: {self.median:.4g} is below {self.at_least:g} beyond the noise "
                         f"(+-{margin:.2g}) although the work cannot be less")
        if self.at_most is not None and self.median > self.at_most + margin:
            found.append(f"implausible: {self.median:.4g} is above {self.at_most:g} beyond the noise "
                         f"(+-{margin:.2g}) although the work cannot allow more")
        return found

    def summary(self) -> dict:
        return {"min": self.min, "median": self.median, "max": self.max, "repeats": list(self.per_repeat),
                "spread": self.spread, "problems": self.problems()}


def alternate(measures: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run every measure once per repeat, back to back; the order flips on every other repeat (A B, B A,
    ...) so a slow drift of the machine weighs on both sides alike. Returns name -> one value per repeat."""
    times: dict[str, list[float]] = {name: [] for name in measures}
    names = list(measures)
    for repeat in range(repeats):
        for name in names if repeat % 2 == 0 else reversed(names):
            times[name].append(measures[name]())
    return times


def per_repeat_ratios(numerator: list[float], denominator: list[float]) -> tuple[float, ...]:
    """numerator[r] / denominator[r] for each repeat r: the pairs were measured side by side."""
    if len(numerator) != len(denominator):
        raise ValueError("both sides of a ratio need the same repeats")
    return tuple(n / d for n, d in zip(numerator, denominator))


def bench_summary(ratios: list[Ratio], derived: dict[str, tuple[str, Callable[[float], float]]] | None = None) -> dict:
    """The bench.json mapping: each key's median, `noisy` (the keys not to be trusted) and `details`.

    `derived`: key -> (source ratio key, f) for a reported value computed from a ratio's median (e.g. the
    PC excess in points); it is noisy exactly when its source is.
    """
    by_key = {r.key: r for r in ratios}
    out: dict = {}
    noisy: list[str] = []
    details: dict = {}
    for ratio in ratios:
        out[ratio.key] = ratio.median
        details[ratio.key] = ratio.summary()
        if ratio.problems():
            noisy.append(ratio.key)
    for key, (source, function) in (derived or {}).items():
        if source not in by_key:
            continue
        ratio = by_key[source]
        out[key] = function(ratio.median)
        details[key] = {"from": source, "min": function(ratio.min), "max": function(ratio.max),
                        "problems": ratio.problems()}
        if ratio.problems():
            noisy.append(key)
    out["noisy"] = noisy
    out["details"] = details
    return out
