"""From timed blocks to a figure the bench can stand behind, or a loud "noisy".

Every quantity is measured many times, in short blocks interleaved with the blocks of what it is compared
with (`bench.turns`: P A B, P B A, ... behind a pacer, each ratio a B block over the A block of its round),
and reported as the **median** of those values with a **95 % interval for the median**. The interval is
distribution-free, from order statistics: with the n values sorted, [x_(k), x_(n+1-k)] where k is the
largest rank with P(Binomial(n, 1/2) < k) <= 2.5 % (so it covers the true median with at least 95 %
whatever the blocks' distribution; it exists from n = 6 on, where it is [min, max]). A preempted block or
two move it by one rank, not by their size.

A row measured in several **repeats** (one interleave each, in a fresh process: `bench.fresh`) pools the
repeats' blocks and widens the interval to cover every repeat's own median: the blocks of one process cannot
show what differs between processes, and for forward-only rows that was a few percent.

A value is a **figure** when its interval lies within +-3 % of its median (`WIDTH`). It is **noisy**
(named in bench.json's `noisy`, its median still written) when

- it has fewer than 6 values (no 95 % interval) or its interval is wider than +-3 %, or
- it is physically implausible: its whole interval lies beyond a bound the work itself sets, by more than
  `floor` (2 %), e.g. a step that does *more* computation than the baseline measured faster than the
  baseline (`at_least=1`), or two workers on two cores more than 2x faster than one (`at_most=2`), or
- the measurement itself found a problem (`notes`, e.g. batched scores that differ).

`clock` says what the values were timed with: "thread" (CPU seconds of the timing thread,
`time.thread_time`: a single-threaded row, where steal time from other guests and other processes do not
count) or "wall" (`time.perf_counter`: rows that span several processes or wait on I/O). A `Target` is what
the issue asks of a row; the bench shows pass/fail next to the figure and never fails on it (`--strict`
fails on noise only).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Callable

WIDTH = 0.03  # a value is a figure when its 95 % interval is within +-3 % of its median
LEVEL = 0.95
FLOOR = 0.02  # implausible only beyond this much (relative) past a bound, on top of the interval
MIN_SAMPLES = 6  # the fewest values with a 95 % order-statistic interval for the median


def median_rank(n: int, level: float = LEVEL) -> int | None:
    """The largest k with P(Binomial(n, 1/2) < k) <= (1 - level) / 2: the interval is the k-th smallest
    and the k-th largest value (1-based); None when not even [min, max] covers the median at `level`."""
    tail, k, below = (1.0 - level) / 2.0, 0, 0.0
    while k < n:
        below_next = below + math.comb(n, k) / 2.0**n  # P(X <= k) = P(X < k + 1)
        if below_next > tail:
            break
        below, k = below_next, k + 1
    return k if k >= 1 else None


def median_interval(values, level: float = LEVEL) -> tuple[float, float] | None:
    """Distribution-free `level` interval for the median of `values` (order statistics); None below 6 values."""
    ordered = sorted(values)
    k = median_rank(len(ordered), level)
    if k is None:
        return None
    return ordered[k - 1], ordered[len(ordered) - k]


@dataclass(frozen=True)
class Target:
    """What the issue asks of a row: `op` is ">=" or "<=" against `bound`."""

    op: str
    bound: float

    def __post_init__(self) -> None:
        if self.op not in (">=", "<="):
            raise ValueError(f"a target compares with >= or <=, not {self.op!r}")

    def meets(self, value: float) -> bool:
        return value >= self.bound if self.op == ">=" else value <= self.bound

    def verdict(self, median: float, interval: tuple[float, float] | None) -> dict:
        """pass/fail on the median; `decided`: the whole interval is on the median's side of the bound."""
        passes = self.meets(median)
        decided = interval is not None and all(self.meets(v) == passes for v in interval)
        return {"op": self.op, "bound": self.bound, "passes": passes, "decided": decided}

    def __str__(self) -> str:
        return f"{self.op} {self.bound:g}"


@dataclass(frozen=True)
class Ratio:
    """One measured quantity, one value per block (or repeat); `at_least` / `at_most`: what the work allows."""

    key: str
    samples: tuple[float, ...]
    at_least: float | None = None
    at_most: float | None = None
    clock: str = "wall"  # what the samples were timed with: "thread" or "wall"
    target: Target | None = None
    notes: tuple[str, ...] = ()  # problems the measurement itself found (e.g. results that disagree)
    wall: tuple[float, ...] = ()  # a thread-clock row's same blocks on the wall clock, reported beside it
    repeats: tuple[float, ...] = ()  # each repeat's median (samples pool the repeats' blocks); the interval spans them
    width: float = WIDTH
    floor: float = FLOOR

    def __post_init__(self) -> None:
        if not self.samples:
            raise ValueError(f"{self.key}: nothing was measured")
        object.__setattr__(self, "samples", tuple(float(v) for v in self.samples))
        object.__setattr__(self, "wall", tuple(float(v) for v in self.wall))
        object.__setattr__(self, "repeats", tuple(float(v) for v in self.repeats))

    @property
    def per_repeat(self) -> tuple[float, ...]:
        return self.samples

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The pooled blocks' interval for the median, widened to every repeat's median where there are repeats."""
        pooled = median_interval(self.samples)
        if pooled is None or not self.repeats:
            return pooled
        return min(pooled[0], *self.repeats), max(pooled[1], *self.repeats)

    @property
    def half_width(self) -> float:
        """The interval's larger side over the median (inf without an interval)."""
        if self.interval is None or not self.median:
            return math.inf
        low, high = self.interval
        return max(high - self.median, self.median - low) / abs(self.median)

    def problems(self) -> list[str]:
        """Why this value is not a figure; empty when it is."""
        found = list(self.notes)
        interval = self.interval
        if interval is None:
            found.append(f"{len(self.samples)} value(s): too few for a 95% interval (at least {MIN_SAMPLES})")
        elif self.half_width > self.width:
            found.append(f"95% interval +-{self.half_width:.1%} (wider than +-{self.width:.0%})")
        low, high = interval if interval is not None else (self.min, self.max)
        slack = self.floor * abs(self.median)
        if self.at_least is not None and high < self.at_least - slack:
            found.append(f"implausible: {self.median:.4g} (interval up to {high:.4g}) is below {self.at_least:g} "
                         "although the work cannot be less")
        if self.at_most is not None and low > self.at_most + slack:
            found.append(f"implausible: {self.median:.4g} (interval from {low:.4g}) is above {self.at_most:g} "
                         "although the work cannot allow more")
        return found

    def summary(self) -> dict:
        interval = self.interval
        out = {"median": self.median, "interval_95": list(interval) if interval else None,
               "half_width": self.half_width if interval else None, "n": len(self.samples), "clock": self.clock,
               "min": self.min, "max": self.max, "samples": list(self.samples), "problems": self.problems()}
        if self.repeats:
            out["repeat_medians"] = list(self.repeats)
        if self.target is not None:
            out["target"] = self.target.verdict(self.median, interval)
        if self.wall:
            wall_interval = median_interval(self.wall)
            out["wall"] = {"median": statistics.median(self.wall),
                           "interval_95": list(wall_interval) if wall_interval else None}
        return out


def alternate(measures: dict[str, Callable[[], float]], repeats: int) -> dict[str, list[float]]:
    """Run every measure once per repeat, back to back; the order flips on every other repeat (A B, B A,
    ...) so a slow drift of the machine weighs on both sides alike. Returns name -> one value per repeat.
    (Whole runs per repeat: for rows too long to cut into blocks; `bench.turns` interleaves blocks.)"""
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


def bench_summary(ratios: list[Ratio], derived: dict | None = None) -> dict:
    """The bench.json mapping: each key's median, `noisy` (the keys that are not figures) and `details`.

    `derived`: key -> (source ratio key, f) or (source, f, Target) for a value computed from a ratio (e.g.
    the PC excess in points); f must be increasing; it is noisy exactly when its source is.
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
    for key, spec in (derived or {}).items():
        source, function, target = (*spec, None)[:3]
        if source not in by_key:
            continue
        ratio = by_key[source]
        value, interval = function(ratio.median), ratio.interval
        details[key] = {"from": source, "median": value, "clock": ratio.clock,
                        "interval_95": [function(v) for v in interval] if interval else None,
                        "min": function(ratio.min), "max": function(ratio.max), "problems": ratio.problems()}
        if target is not None:
            details[key]["target"] = target.verdict(value, details[key]["interval_95"])
        out[key] = value
        if ratio.problems():
            noisy.append(key)
    out["noisy"] = noisy
    out["details"] = details
    return out
