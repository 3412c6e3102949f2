"""An ablation's arms against their reference arms, paired by seed: the tables a report renders.

    effects = effects_table(ab, claim, metrics=["val/loss"])  # differences, CIs, p-values, seed sd and MDD
    speed = speedups_table(ab, claim)                       # tokens to reach the reference's final loss
    cost = overhead_table(ab, claim)                        # wall time per token vs the reference
    summary = arm_summary_table(ab, ["val/loss"])           # every arm on its own: mean +/- sd over seeds

The claim's checks with a verdict each are analysis/verdict_table.py's (verdicts_table).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.ablation import (
    SECONDS_PER_TOKEN, TRAIN_LOSS, TRAIN_TAIL, Ablation, arm_values, better_direction,
)
from analysis.claims import Claim, join_arm, split_arm
from analysis.curves import Speedup, speedup_vs_baseline
from analysis.load_runs import numeric
from analysis.seeds import seed_key
from analysis.stats import PairedComparison, SeedNoise, compare_paired, seed_noise
from lit_modules.runs import metric_names


def reference_of(ab: Ablation, claim: Claim, arm: str) -> str:
    """The claim's reference within the arm's variant; the baseline's family of that variant when the
    ablation lacks it (e.g. `arms=` left a reference out)."""
    ref = claim.reference_arm(arm, ab.baseline)
    if ref in ab.arms:
        return ref
    return join_arm(split_arm(ab.baseline)[0], split_arm(arm)[1])


def compare(ab: Ablation, arm: str, reference: str, metric: str) -> tuple[PairedComparison, SeedNoise]:
    ref_values = arm_values(ab, reference, metric)
    comparison = compare_paired(arm_values(ab, arm, metric), ref_values)
    return comparison, seed_noise(list(ref_values.values()))


def effects_table(ab: Ablation, claim: Claim, metrics: list[str]) -> pd.DataFrame:
    """Every arm vs its reference on each metric: the measured table, no verdicts."""
    rows = []
    for metric in metrics:
        for arm in ab.arms:
            reference = reference_of(ab, claim, arm)
            if arm == reference:
                continue
            c, noise = compare(ab, arm, reference, metric)
            if c.n == 0:
                continue
            rows.append(comparison_row(arm, reference, metric, better_direction(metric), c, noise))
    return pd.DataFrame(rows)


def speedup_of(ab: Ablation, arm: str, reference: str) -> Speedup:
    return speedup_vs_baseline(ab.curves, ab.run_ids(arm), ab.run_ids(reference))


def speedups_table(ab: Ablation, claim: Claim) -> pd.DataFrame:
    """Per arm: the reference's budget over the arm's tokens to the reference's final loss (the papers'
    reading) and the first-crossing reading beside it, geometric means over seeds; not reached: said so."""
    rows = []
    for arm in ab.arms:
        reference = reference_of(ab, claim, arm)
        if arm == reference:
            continue
        s = speedup_of(ab, arm, reference)
        if not s.n:
            continue
        budget, first = s.log_budget_speedups, s.log_first_crossing
        reached = not s.not_reached
        rows.append({
            "arm": arm, "reference": reference, "n": s.n, "seeds": ",".join(s.seeds),
            "ref_budget": float(np.mean(s.base_budget)), "ref_tokens": s.mean_base_tokens,
            "arm_tokens": s.mean_arm_tokens,
            "speedup": math.exp(float(np.mean(list(budget.values())))) if reached else float("nan"),
            "speedup_first_crossing": math.exp(float(np.mean(list(first.values())))) if reached else float("nan"),
            "per_seed": ", ".join(f"{math.exp(budget[x]):.2f}" if x in budget else "not reached" for x in s.seeds),
            "not_reached": s.not_reached, "summary": s.describe(),
        })
    return pd.DataFrame(rows)


def seconds_per_token(run_curves: pd.DataFrame, tokens_per_step: float) -> float:
    """Median wall time per token over one run's throughput logs, the first (warm-up) one left out."""
    named = run_curves["key"].map(metric_names.current_name)
    rate = run_curves[named == metric_names.TOKENS_PER_S].sort_values("step")["value"].to_numpy(dtype=float)
    if rate.size:
        rate = rate[1:] if rate.size > 1 else rate
        rate = rate[np.isfinite(rate) & (rate > 0)]
        if rate.size:
            return float(1.0 / np.median(rate))
    step_time = run_curves[named == metric_names.STEP_TIME_S].sort_values("step")["value"].to_numpy(dtype=float)
    step_time = step_time[1:] if step_time.size > 1 else step_time
    if step_time.size and tokens_per_step > 0:
        return float(np.median(step_time) / tokens_per_step)
    return float("nan")


def overhead_table(ab: Ablation, claim: Claim) -> pd.DataFrame:
    """Wall time per token of each arm relative to its reference: geometric mean of per-seed ratios."""
    per_run = dict(zip(ab.finished["run_id"], numeric(ab.finished[SECONDS_PER_TOKEN]))) \
        if SECONDS_PER_TOKEN in ab.finished else {}
    rows = []
    for arm in ab.arms:
        reference = reference_of(ab, claim, arm)
        arm_ids, ref_ids = ab.run_ids(arm), ab.run_ids(reference)
        arm_spt = [per_run.get(i, float("nan")) for i in arm_ids.values()]
        pairs = [(per_run.get(arm_ids[s], float("nan")), per_run.get(ref_ids[s], float("nan")))
                 for s in arm_ids if s in ref_ids]
        ratios = [a / b for a, b in pairs if math.isfinite(a) and math.isfinite(b) and b > 0]
        rows.append({
            "arm": arm, "reference": reference, "n": len(ratios),
            "us_per_token": 1e6 * float(np.nanmean(arm_spt)) if arm_spt and np.isfinite(arm_spt).any() else float("nan"),
            "ratio": float(np.exp(np.mean(np.log(ratios)))) if ratios and arm != reference else float("nan"),
            "ratio_min": min(ratios) if ratios and arm != reference else float("nan"),
            "ratio_max": max(ratios) if ratios and arm != reference else float("nan"),
        })
    return pd.DataFrame(rows)


def final_train_loss(ab: Ablation, run_id: str) -> float:
    """Mean of a run's last TRAIN_TAIL logged train/loss values: one logged value is a single micro-batch."""
    if ab.curves.empty:
        return float("nan")
    values = ab.curves[(ab.curves["run_id"] == run_id) & (ab.curves["key"] == "train/loss")].sort_values("step")
    tail = values["value"].to_numpy(dtype=float)[-TRAIN_TAIL:]
    return float(np.mean(tail)) if tail.size else float("nan")


def arm_summary_table(ab: Ablation, metrics: list[str]) -> pd.DataFrame:
    """One row per arm and metric: mean, sample sd (ddof 1), min and max over its finished seeds.

    The train loss (`TRAIN_LOSS`) comes first; arms with no finite value for a metric are left out."""
    rows = []
    for metric in [TRAIN_LOSS, *metrics]:
        for arm in ab.arms:
            finished = ab.finished[ab.finished["arm"] == arm]
            if metric == TRAIN_LOSS:
                values = {r["seed"]: final_train_loss(ab, r["run_id"]) for _, r in finished.iterrows()}
            else:
                values = arm_values(ab, arm, metric)
            finite = np.array([v for v in values.values() if math.isfinite(v)], dtype=float)
            if not finite.size:
                continue
            rows.append({
                "metric": metric, "arm": arm, "n": int(finite.size),
                "seeds": ",".join(sorted((k for k, v in values.items() if math.isfinite(v)), key=seed_key)),
                "mean": float(finite.mean()), "sd": float(finite.std(ddof=1)) if finite.size > 1 else float("nan"),
                "min": float(finite.min()), "max": float(finite.max()),
            })
    return pd.DataFrame(rows)


def seed_noise_table(ab: Ablation, claim: Claim, metrics: list[str]) -> pd.DataFrame:
    """Per reference arm (each variant's baseline and any other reference) and metric: seed sd and MDD."""
    references = list(dict.fromkeys(reference_of(ab, claim, arm) for arm in ab.arms))
    rows = []
    for metric in metrics:
        for reference in references:
            finite = [v for v in arm_values(ab, reference, metric).values() if math.isfinite(v)]
            if not finite:
                continue
            noise = seed_noise(finite)
            rows.append({"metric": metric, "reference": reference, "n": noise.n, "mean": float(np.mean(finite)),
                         "seed_sd": noise.sd, "mdd": noise.mdd})
    return pd.DataFrame(rows)


def comparison_row(arm: str, reference: str, metric: str, better: str, c: PairedComparison,
                   noise: SeedNoise) -> dict:
    """The measured columns of a comparison: ci_* is the 95% paired t interval, boot_* the bootstrap (n >= 10)."""
    return {
        "arm": arm, "reference": reference, "metric": metric, "better": better, "n": c.n,
        "seeds": ",".join(c.seeds), "mean_ref": c.mean_ref, "mean_arm": c.mean_arm, "diff": c.mean_diff,
        "rel_diff": c.relative_diff, "sd_diff": c.sd_diff, "ci_low": c.ci_low, "ci_high": c.ci_high,
        "boot_low": c.boot_low, "boot_high": c.boot_high, "p_t": c.p_t, "p_sign_flip": c.p_sign_flip,
        "exact": c.exact, "seed_sd": noise.sd, "mdd": noise.mdd,
    }
