"""An ablation's runs -> per-arm comparisons with its reference arm, paired by seed.

    ab = load_ablation(store, parent_run)
    effects = effects_table(ab, metrics=["val/loss"])      # differences, CIs, p-values, noise floor
    checks = verdicts_table(ab, claim_for(ab.name))         # the claim's checks with a verdict each
    speed = speedups(ab, claim)                             # tokens to reach the reference's final loss
    cost = overhead_table(ab, claim)                        # wall time per token vs the reference
    summary = arm_summary_table(ab, ["val/loss"])           # every arm on its own: mean +/- sd over seeds

Only FINISHED runs enter the statistics (a FAILED or KILLED cell is listed, never averaged); when a cell
(arm, seed) finished more than once under the parent, the newest run counts.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from mlflow.entities import Run

from analysis.claims import INCONCLUSIVE, MIN_SEEDS, NOT_REPRODUCED, REPRODUCED, Check, Claim, Verdict, verdict
from analysis.curves import Speedup, speedup_vs_baseline
from analysis.load_runs import RunStore, numeric
from analysis.stats import NoiseFloor, PairedComparison, compare_paired, noise_floor

TRAIN_TAIL = 5  # logged train/loss values (one micro-batch each) averaged into a run's final train loss
TRAIN_LOSS = "train/loss (last 5 logged)"
CURVE_KEYS = ("val/loss", "val/bits_per_byte", "train/loss", "perf/tokens_per_s", "perf/step_time_s")
CURVE_PREFIXES = (
    "diag/gmcn/", "diag/stable_rank/mean/", "diag/condensation/mean_abs_cos/mean/", "diag/attention_sink/",
    "wisca/", "mols/",
)
LOWER_IS_BETTER_WORDS = ("loss", "perplexity", "ppl", "bits_per_byte", "bpb", "error", "brier", "ece")
FINETUNE_PREFIX = "finetune:"


@dataclass
class Ablation:
    name: str
    parent: Run
    baseline: str
    arms: list[str]  # baseline first, then the preset's order
    runs: pd.DataFrame  # every child run, with `arm` and `seed` columns
    finished: pd.DataFrame  # one FINISHED run per (arm, seed)
    curves: pd.DataFrame
    finetunes: pd.DataFrame = field(default_factory=pd.DataFrame)

    def run_ids(self, arm: str) -> dict[str, str]:
        """seed -> run id of the arm's finished runs."""
        rows = self.finished[self.finished["arm"] == arm]
        return dict(zip(rows["seed"], rows["run_id"]))

    def seeds(self) -> list[str]:
        return sorted(set(self.finished["seed"]), key=_seed_key)

    def total_tokens(self) -> float:
        col = "params.budget.total_tokens"
        if col not in self.finished:
            return float("nan")
        return float(numeric(self.finished[col]).median())


def load_ablation(store: RunStore, parent: Run) -> Ablation:
    name = parent.data.tags.get("ablation.name", parent.info.run_name or parent.info.run_id)
    runs = store.runs_frame(store.children(parent.info.run_id))
    runs["arm"] = runs["tags.ablation.arm"] if "tags.ablation.arm" in runs else pd.Series(dtype=str)
    runs["seed"] = runs["tags.seed"] if "tags.seed" in runs else pd.Series(dtype=str)
    baseline = _baseline_of(runs, parent)
    arms = _arm_order(runs, parent, baseline)
    finished = runs[runs["status"] == "FINISHED"].sort_values("start_time")
    finished = finished.drop_duplicates(["arm", "seed"], keep="last").reset_index(drop=True)
    curves = store.curves(finished, keys=CURVE_KEYS, prefixes=CURVE_PREFIXES)
    finetunes = store.runs_frame(store.finetunes_of(finished["run_id"]))
    return Ablation(name, parent, baseline, arms, runs, finished, curves, finetunes)


def _baseline_of(runs: pd.DataFrame, parent: Run) -> str:
    col = "params.ablation.baseline"
    if col in runs and runs[col].notna().any():
        return str(runs[col].dropna().iloc[0])
    return str(parent.data.params.get("ablation.baseline", ""))


def _arm_order(runs: pd.DataFrame, parent: Run, baseline: str) -> list[str]:
    """Baseline first, then the order of the preset's arm list (the parent's `arms` param)."""
    present = [a for a in runs["arm"].dropna().unique()] if "arm" in runs else []
    listed = [a.strip().rsplit("/", 1)[-1] for a in parent.data.params.get("arms", "").split(",") if a.strip()]
    order = {a: i for i, a in enumerate(listed)}
    arms = sorted(present, key=lambda a: (a != baseline, order.get(a, len(order)), a))
    return arms


# ---------------------------------------------------------------------------------------- values


def better_direction(metric: str) -> str:
    name = metric.rsplit("/", 1)[-1].lower()
    return "lower" if any(w in name for w in LOWER_IS_BETTER_WORDS) or metric.startswith("val/") else "higher"


def eval_metrics(ab: Ablation) -> list[str]:
    """Final `eval/<task>/<metric>` names present in the finished runs (no stderr, no timing)."""
    names = sorted(c[len("metrics."):] for c in ab.finished.columns if c.startswith("metrics.eval/"))
    return [n for n in names if n.count("/") >= 2 and not n.endswith("_stderr") and "stderr" not in n]


def run_value(ab: Ablation, row: pd.Series, metric: str) -> float:
    """One run's final value of a metric, a pattern (mean over matches) or a fine-tune metric."""
    if metric.startswith(FINETUNE_PREFIX):
        return _finetune_value(ab, row["run_id"], metric[len(FINETUNE_PREFIX):])
    return _pattern_mean(row, metric)


def arm_values(ab: Ablation, arm: str, metric: str) -> dict[str, float]:
    rows = ab.finished[ab.finished["arm"] == arm]
    return {row["seed"]: run_value(ab, row, metric) for _, row in rows.iterrows()}


def _pattern_mean(row: pd.Series, metric: str) -> float:
    if "*" not in metric:
        value = row.get(f"metrics.{metric}")
        return float(value) if value is not None and pd.notna(value) else float("nan")
    values = [float(v) for c, v in row.items()
              if isinstance(c, str) and c.startswith("metrics.") and fnmatch.fnmatchcase(c[8:], metric) and pd.notna(v)]
    return float(np.mean(values)) if values else float("nan")


def _finetune_value(ab: Ablation, base_run_id: str, metric: str) -> float:
    if ab.finetunes.empty or "tags.finetune.base_run_id" not in ab.finetunes:
        return float("nan")
    rows = ab.finetunes[(ab.finetunes["tags.finetune.base_run_id"] == base_run_id) & (ab.finetunes["status"] == "FINISHED")]
    values = [v for _, r in rows.iterrows() if math.isfinite(v := _pattern_mean(r, metric))]
    return float(np.mean(values)) if values else float("nan")


# ---------------------------------------------------------------------------------------- tables


def reference_of(ab: Ablation, claim: Claim, arm: str) -> str:
    ref = claim.reference_arm(arm, ab.baseline)
    return ref if ref in ab.arms else ab.baseline


def compare(ab: Ablation, arm: str, reference: str, metric: str) -> tuple[PairedComparison, NoiseFloor]:
    ref_values = arm_values(ab, reference, metric)
    comparison = compare_paired(arm_values(ab, arm, metric), ref_values)
    return comparison, noise_floor(list(ref_values.values()))


def effects_table(ab: Ablation, claim: Claim, metrics: list[str]) -> pd.DataFrame:
    """Every arm (but the baseline) vs its reference on each metric: the measured table, no verdicts."""
    rows = []
    for metric in metrics:
        for arm in ab.arms:
            if arm == ab.baseline:
                continue
            reference = reference_of(ab, claim, arm)
            c, noise = compare(ab, arm, reference, metric)
            if c.n == 0:
                continue
            rows.append(_comparison_row(arm, reference, metric, better_direction(metric), c, noise))
    return pd.DataFrame(rows)


def verdicts_table(ab: Ablation, claim: Claim) -> pd.DataFrame:
    """The claim's checks, one row per (check, arm), with the verdict and its reason."""
    ratio = ab.total_tokens() / claim.paper_tokens if claim.paper_tokens else None
    ratio = ratio if ratio is not None and math.isfinite(ratio) else None
    rows = []
    for check in claim.checks:
        for arm in ab.arms:
            applies, expect = claim.expectation(arm, check)
            if arm == ab.baseline or not applies:
                continue
            reference = reference_of(ab, claim, arm)
            if arm == reference:
                continue
            c, noise, effect = _check_comparison(ab, check, arm, reference)
            v = verdict(expect, check.better, c, None if check.metric == "speedup" else noise, ratio, effect)
            if check.metric == "speedup":
                v = _speedup_bounds(ab, arm, reference, expect, v)
            row = _comparison_row(arm, reference, check.metric, check.better, c, noise)
            row.update({"expect": expect or "-", "paper": check.paper, "verdict": v.label, "reason": v.reason})
            rows.append(row)
    return pd.DataFrame(rows)


def _check_comparison(ab: Ablation, check: Check, arm: str, reference: str):
    effect = check.effects.get(arm)
    if check.metric != "speedup":
        c, noise = compare(ab, arm, reference, check.metric)
        return c, noise, effect
    # Speedup: per seed log(reference tokens / arm tokens), tested against 0 (no speedup).
    s = speedup_of(ab, arm, reference)
    logs = {seed: math.log(b / a if math.isfinite(a) else b / budget)
            for seed, b, a, budget in zip(s.seeds, s.base_tokens, s.arm_tokens, s.arm_budget) if b > 0}
    c = compare_paired(logs, {seed: 0.0 for seed in logs})
    return c, noise_floor([]), math.log(effect) if effect else None


def _speedup_bounds(ab: Ablation, arm: str, reference: str, expect: str | None, v: Verdict) -> Verdict:
    """Rule (6). A seed that never reached the target only bounds its speedup from above (reference tokens /
    the arm's budget), so it can never support a claimed speedup; on every one of enough seeds, with at least
    the tokens the reference needed, it refutes one."""
    s = speedup_of(ab, arm, reference)
    if not s.not_reached:
        return v
    enough_tokens = all(a >= b for a, b in zip(s.arm_budget, s.base_tokens))
    if expect == "better" and s.n >= MIN_SEEDS and s.not_reached == s.n and enough_tokens:
        return Verdict(NOT_REPRODUCED, f"never reached its reference's final val/loss with at least the reference's "
                                   f"tokens on any of {s.n} seeds: speedup < 1x on every seed")
    if v.label == REPRODUCED:
        return Verdict(INCONCLUSIVE, f"{s.not_reached} of {s.n} seeds never reached the target, so their speedup "
                                     "is only bounded from above")
    return v


def speedup_of(ab: Ablation, arm: str, reference: str) -> Speedup:
    return speedup_vs_baseline(ab.curves, ab.run_ids(arm), ab.run_ids(reference))


def speedups_table(ab: Ablation, claim: Claim) -> pd.DataFrame:
    rows = []
    for arm in ab.arms:
        reference = reference_of(ab, claim, arm)
        if arm == reference:
            continue
        s = speedup_of(ab, arm, reference)
        if not s.n:
            continue
        rows.append({
            "arm": arm, "reference": reference, "n": s.n, "seeds": ",".join(s.seeds),
            "ref_tokens": s.mean_base_tokens, "arm_tokens": s.mean_arm_tokens,
            "speedup": s.speedup if not s.not_reached else float("nan"),
            "per_seed": ", ".join(f"{x:.2f}" for x in s.per_seed), "not_reached": s.not_reached,
            "summary": s.describe(),
        })
    return pd.DataFrame(rows)


def seconds_per_token(ab: Ablation, run_id: str, tokens_per_step: float) -> float:
    """Median wall time per token over the run's throughput logs, the first (warm-up) one left out."""
    rows = ab.curves[(ab.curves["run_id"] == run_id)]
    rate = rows[rows["key"] == "perf/tokens_per_s"].sort_values("step")["value"].to_numpy()
    if rate.size:
        rate = rate[1:] if rate.size > 1 else rate
        rate = rate[np.isfinite(rate) & (rate > 0)]
        if rate.size:
            return float(1.0 / np.median(rate))
    step_time = rows[rows["key"] == "perf/step_time_s"].sort_values("step")["value"].to_numpy()
    step_time = step_time[1:] if step_time.size > 1 else step_time
    if step_time.size and tokens_per_step > 0:
        return float(np.median(step_time) / tokens_per_step)
    return float("nan")


def overhead_table(ab: Ablation, claim: Claim) -> pd.DataFrame:
    """Wall time per token of each arm relative to its reference: geometric mean of per-seed ratios."""
    per_run = {}
    for _, row in ab.finished.iterrows():
        tps = pd.to_numeric(pd.Series([row.get("params.budget.tokens_per_step")]), errors="coerce").iloc[0]
        per_run[row["run_id"]] = seconds_per_token(ab, row["run_id"], float(tps))
    rows = []
    for arm in ab.arms:
        reference = reference_of(ab, claim, arm)
        arm_ids, ref_ids = ab.run_ids(arm), ab.run_ids(reference)
        arm_spt = [per_run.get(i, float("nan")) for i in arm_ids.values()]
        pairs = [(per_run[arm_ids[s]], per_run[ref_ids[s]]) for s in arm_ids if s in ref_ids]
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
                "seeds": ",".join(sorted((k for k, v in values.items() if math.isfinite(v)), key=_seed_key)),
                "mean": float(finite.mean()), "sd": float(finite.std(ddof=1)) if finite.size > 1 else float("nan"),
                "min": float(finite.min()), "max": float(finite.max()),
            })
    return pd.DataFrame(rows)


def noise_table(ab: Ablation, metrics: list[str]) -> pd.DataFrame:
    rows = []
    for metric in metrics:
        values = arm_values(ab, ab.baseline, metric)
        finite = [v for v in values.values() if math.isfinite(v)]
        if not finite:
            continue
        noise = noise_floor(finite)
        rows.append({"metric": metric, "n": noise.n, "mean": float(np.mean(finite)), "sd": noise.sd,
                     "min_detectable": noise.min_detectable})
    return pd.DataFrame(rows)


def _comparison_row(arm, reference, metric, better, c: PairedComparison, noise: NoiseFloor) -> dict:
    return {
        "arm": arm, "reference": reference, "metric": metric, "better": better, "n": c.n,
        "seeds": ",".join(c.seeds), "mean_ref": c.mean_ref, "mean_arm": c.mean_arm, "diff": c.mean_diff,
        "rel_diff": c.relative_diff, "ci_low": c.ci_low, "ci_high": c.ci_high, "p_t": c.p_t,
        "p_sign_flip": c.p_sign_flip, "exact": c.exact, "noise_sd": noise.sd, "min_detectable": noise.min_detectable,
    }


def _seed_key(seed: str) -> tuple[int, float | str]:
    try:
        return 0, float(seed)
    except (TypeError, ValueError):
        return 1, str(seed)
