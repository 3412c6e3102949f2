"""Curves against tokens seen: mean and band over seeds, tokens to reach a target loss, speedup.

A speedup is read two ways (shared/reference/statistics.md). The papers' reading, the headline: the
reference's whole budget over the tokens the arm needs to reach the reference's final val/loss
(`budget_speedup`). Next to it, the reference's own first crossing of its final loss over the arm's
(`first_crossing`): where the reference's last evaluations are flat, that first crossing follows noise.
"Tokens to reach" is the first tokens_seen at which a val/loss curve is at or below the target. Between
two evaluations the curve is interpolated linearly, so the answer does not jump by a whole evaluation
interval. If the first evaluation is already at or below the target, the answer is that evaluation's
tokens (there is no earlier point to interpolate from: an upper bound). A curve that never reaches the
target returns +inf: "more than this run's budget", never a number that looks measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis.seeds import seed_key

NOT_REACHED = math.inf


def tokens_to_target(tokens: np.ndarray, values: np.ndarray, target: float) -> float:
    """First tokens at which `values` (a loss, lower is better) reaches `target`; +inf if never."""
    tokens = np.asarray(tokens, dtype=float)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(tokens) & np.isfinite(values)
    tokens, values = tokens[keep], values[keep]
    order = np.argsort(tokens, kind="stable")
    tokens, values = tokens[order], values[order]
    if tokens.size == 0 or not math.isfinite(target):
        return float("nan")
    reached = np.flatnonzero(values <= target)
    if reached.size == 0:
        return NOT_REACHED
    i = int(reached[0])
    if i == 0:
        return float(tokens[0])
    t0, t1, v0, v1 = tokens[i - 1], tokens[i], values[i - 1], values[i]
    return float(t0 + (v0 - target) / (v0 - v1) * (t1 - t0))  # v0 > target >= v1, so v0 > v1


@dataclass(frozen=True)
class Speedup:
    """Tokens each arm needs to reach its paired baseline seed's final loss, over the paired seeds."""

    seeds: tuple[str, ...]
    base_tokens: tuple[float, ...]  # the baseline seed reaching its own final loss
    arm_tokens: tuple[float, ...]  # +inf where the arm never reached it
    arm_budget: tuple[float, ...]  # the arm's last evaluated tokens (bounds a not-reached speedup)
    base_budget: tuple[float, ...] = ()  # the reference's last evaluated tokens (its whole budget)
    closest_gap: tuple[float, ...] = ()  # the arm's lowest val/loss minus the target (<= 0 where reached)

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def not_reached(self) -> int:
        return sum(1 for t in self.arm_tokens if not math.isfinite(t))

    @property
    def mean_base_tokens(self) -> float:
        return float(np.mean(self.base_tokens)) if self.n else float("nan")

    @property
    def mean_arm_tokens(self) -> float:
        """Mean over seeds; +inf when any seed never reached the target."""
        return float(np.mean(self.arm_tokens)) if self.n else float("nan")

    @property
    def speedup(self) -> float:
        """Mean baseline tokens / mean arm tokens (0 if some seed never reached the target)."""
        if not self.n:
            return float("nan")
        return self.mean_base_tokens / self.mean_arm_tokens

    @property
    def log_budget_speedups(self) -> dict[str, float]:
        """seed -> ln(reference budget / arm tokens to the target), for the seeds that reached it."""
        return {s: math.log(b / a) for s, b, a in zip(self.seeds, self.base_budget, self.arm_tokens)
                if math.isfinite(a) and a > 0 and b > 0}

    @property
    def log_first_crossing(self) -> dict[str, float]:
        """seed -> ln(reference's first crossing of its final loss / the arm's), for the seeds that reached it."""
        return {s: math.log(b / a) for s, b, a in zip(self.seeds, self.base_tokens, self.arm_tokens)
                if math.isfinite(a) and a > 0 and b > 0}

    def not_reached_text(self) -> str:
        """'' when every seed reached the target; else how many did not, and their closest approach."""
        if not self.not_reached:
            return ""
        gaps = [g for g, a in zip(self.closest_gap, self.arm_tokens) if not math.isfinite(a)]
        closest = f"; closest approach {min(gaps):+.4f} nats above the target" if gaps else ""
        return f"on {self.not_reached} of {self.n} seeds{closest}"

    @property
    def per_seed(self) -> tuple[float, ...]:
        return tuple(b / a for b, a in zip(self.base_tokens, self.arm_tokens))

    @property
    def upper_bound(self) -> float:
        """When some seed never reached the target: the speedup is at most base / (arm's budget)."""
        tokens = [a if math.isfinite(a) else budget for a, budget in zip(self.arm_tokens, self.arm_budget)]
        return self.mean_base_tokens / float(np.mean(tokens)) if self.n else float("nan")

    def describe(self) -> str:
        if not self.n:
            return "no paired seeds with val/loss curves"
        if self.not_reached:
            return f"did not reach the reference's final val/loss {self.not_reached_text()}"
        budget = math.exp(float(np.mean(list(self.log_budget_speedups.values()))))
        first = math.exp(float(np.mean(list(self.log_first_crossing.values()))))
        return (f"{budget:.3g}x by the reference's budget, {first:.3g}x by first crossing (geometric means over "
                f"{self.n} seeds)")


def speedup_vs_baseline(
    curves: pd.DataFrame, arm_runs: dict[str, str], base_runs: dict[str, str], key: str = "val/loss"
) -> Speedup:
    """Paired by seed: `arm_runs` and `base_runs` map seed -> run id; `curves` is a curves frame."""
    seeds, base_tokens, arm_tokens, budgets, base_budgets, gaps = [], [], [], [], [], []
    for seed in sorted(set(arm_runs) & set(base_runs), key=seed_key):
        base = _curve(curves, base_runs[seed], key)
        arm = _curve(curves, arm_runs[seed], key)
        if base.empty or arm.empty:
            continue
        target = float(base["value"].iloc[-1])
        seeds.append(seed)
        base_tokens.append(tokens_to_target(base["tokens_seen"], base["value"], target))
        arm_tokens.append(tokens_to_target(arm["tokens_seen"], arm["value"], target))
        budgets.append(float(arm["tokens_seen"].iloc[-1]))
        base_budgets.append(float(base["tokens_seen"].iloc[-1]))
        gaps.append(float(arm["value"].min()) - target)
    return Speedup(tuple(seeds), tuple(base_tokens), tuple(arm_tokens), tuple(budgets), tuple(base_budgets),
                   tuple(gaps))


def mean_band(curves: pd.DataFrame, key: str, run_groups: dict[str, list[str]]) -> pd.DataFrame:
    """Per group (e.g. arm) and tokens_seen: mean, std, min, max and n of `key` over the group's runs.

    Runs of one group share their evaluation steps (same schedule, different seeds); a step only some
    runs reached (a crashed seed) still appears, with its smaller n.
    """
    rows = curves[curves["key"] == key]
    pieces = []
    for group, run_ids in run_groups.items():
        sub = rows[rows["run_id"].isin(run_ids)]
        if sub.empty:
            continue
        agg = sub.groupby("tokens_seen")["value"].agg(["mean", "std", "min", "max", "count"]).reset_index()
        agg = agg.rename(columns={"count": "n"})
        agg.insert(0, "group", group)
        pieces.append(agg)
    if not pieces:
        return pd.DataFrame(columns=["group", "tokens_seen", "mean", "std", "min", "max", "n"])
    return pd.concat(pieces, ignore_index=True)


def _curve(curves: pd.DataFrame, run_id: str, key: str) -> pd.DataFrame:
    rows = curves[(curves["run_id"] == run_id) & (curves["key"] == key)]
    return rows.sort_values("step").dropna(subset=["tokens_seen", "value"])
