"""An ablation's runs as one store-free data model, and the values a comparison reads from it.

    ab = load_ablation(store, parent_run)                   # analysis.store_ablation (or read_results)
    value = run_value(ab, row, "eval/*/acc")                # one run's value of a metric or pattern

The tables made from it (arm - reference, paired by seed) are analysis/comparisons.py's; the verdicts
analysis/verdict_table.py's.

`Ablation` is the one representation a report renders from: the parent's tags and params, frames of the
child runs, their curves and fine-tune runs, and the tables made from artifacts. It holds no live store:
`analysis.store_ablation` builds it from MLflow, `analysis.results_data` writes it to and reads it from
CSV files, so a report made from either is the same by construction.

Only FINISHED runs enter the statistics (a FAILED or KILLED cell is listed, never averaged); when a cell
(arm, seed) finished more than once under the parent, the newest run counts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis.claims import Claim, checked_metrics, is_finetune_tuning_base, split_arm
from analysis.load_runs import numeric
from analysis.scale import Scale
from analysis.seeds import seed_key
from lit_modules.runs import metric_names, tags
from lit_modules.evaluation.results import ITEMS
from lit_modules.technique_reports import curve_prefixes, final_metric_prefixes

TRAIN_TAIL = 5  # logged train/loss values (one micro-batch each) averaged into a run's final train loss
TRAIN_LOSS = "train/loss (last 5 logged)"
# Read to derive SECONDS_PER_TOKEN, then dropped; under today's names and those of older runs.
PERF_KEYS = (metric_names.TOKENS_PER_S, metric_names.STEP_TIME_S, "perf/tokens_per_s", "perf/step_time_s")
CURVE_KEYS = ("val/loss", "train/loss", *PERF_KEYS)  # val/bits_per_byte: only its final value is reported
# Histories a report reads besides the losses: the core diagnostics' and those each technique declares.
CURVE_PREFIXES = ("diag/stable_rank/mean/", *curve_prefixes())
SECONDS_PER_TOKEN = "derived.seconds_per_token"
LOWER_IS_BETTER_WORDS = ("loss", "perplexity", "ppl", "bits_per_byte", "bpb", "error", "brier", "ece")
FINETUNE_PREFIX = "finetune:"
CLAIM_TAG = tags.ABLATION_CLAIM

# What a report reads of a run; the rest of MLflow's record (hundreds of config params, package versions)
# stays in the store. Exact keys or prefixes (ending in "." or "/").
RUN_COLUMNS = ("run_id", "run_name", "status", "start_time", "end_time")
KEEP_PARAMS = ("ablation.baseline", "ablation.claim", "budget.", "model.name", "optim.name", "optim.lr", "optim.weight_decay",
               "regime.", "schedule.name", "trainer.num_threads", "trainer.max_steps", "data.seq_len", "data.batch_size",
               "seed", "init_std.", "optim.muon_lr")  # muon_lr: the rate a tuned Muon arm ran at (analysis/lr_tuning.py)
KEEP_TAGS = ("seed", "ablation.", "config_hash", "git_commit", "git_dirty", "end_reason", "hw.cpu_threads",
             "hw.platform", "fidelity.", "finetune.")
# "init/std/": the initial stds of runs recorded before they became params (`init_std.*` above).
# Final values a report reads: the held-out and diagnostic families, the training-time ones (train/loss,
# train/grad_norm: a stability claim is judged on them), each technique's own, any metric a claim checks, and
# data/epochs: how many times the run read its training split.
KEEP_METRICS = ("val/", "eval/", "diag/", "init/std/", "finetune/", "train/", "data/epochs", *final_metric_prefixes(),
                *checked_metrics())


@dataclass(frozen=True)
class ParentRecord:
    """What a report reads of the ablation's parent run."""

    run_id: str
    status: str
    run_name: str
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    source: str = ""  # where the runs were read from (the tracking URI at export)

    @property
    def name(self) -> str:
        return self.tags.get("ablation.name") or self.run_name or self.run_id


@dataclass(frozen=True)
class SvHist:
    """A run's own singular-value histogram (the `sv_hist` diagnostic writes a PNG, no numbers)."""

    arm: str
    seed: str
    artifact: str
    png: bytes


@dataclass
class Ablation:
    name: str
    parent: ParentRecord | None
    baseline: str
    arms: list[str]  # grouped by variant (the baseline's first), reference first, then the preset's order
    runs: pd.DataFrame  # every child run, with `arm` and `seed` columns
    finished: pd.DataFrame  # one FINISHED run per (arm, seed)
    curves: pd.DataFrame
    finetunes: pd.DataFrame = field(default_factory=pd.DataFrame)
    token_gaps: pd.DataFrame = field(default_factory=pd.DataFrame)  # analysis.typed_tables.TOKEN_GAP_COLUMNS
    sv_hists: list[SvHist] = field(default_factory=list)

    def run_ids(self, arm: str) -> dict[str, str]:
        """seed -> run id of the arm's finished runs."""
        rows = self.finished[self.finished["arm"] == arm]
        return dict(zip(rows["seed"], rows["run_id"]))

    def seeds(self) -> list[str]:
        return sorted(set(self.finished["seed"]), key=seed_key)

    def total_tokens(self) -> float:
        col = "params.budget.total_tokens"
        if col not in self.finished:
            return float("nan")
        return float(numeric(self.finished[col]).median())

    def variants(self) -> list[str]:
        return list(dict.fromkeys(split_arm(a)[1] for a in self.arms))

    @property
    def claim_key(self) -> str:
        """The claim this ablation tests: `ablation.claim` as a tag of the parent or a child, or as a child's
        config param (a preset setting `ablation.claim`), else the ablation's name."""
        if self.parent is not None and self.parent.tags.get(CLAIM_TAG):
            return self.parent.tags[CLAIM_TAG]
        for col in (f"tags.{CLAIM_TAG}", f"params.{CLAIM_TAG}"):
            if col in self.runs:
                named = self.runs[col].dropna().astype(str)
                named = named[named != ""]  # the schema's default: no claim named
                if len(named):
                    return named.iloc[0]
        return self.name


def assemble(parent: ParentRecord, runs: pd.DataFrame, curves: pd.DataFrame, finetunes: pd.DataFrame,
             token_gaps: pd.DataFrame, sv_hists: list[SvHist]) -> Ablation:
    """The Ablation of already-selected frames (`slim_runs`): both the store and the CSV path end here."""
    runs = runs.copy()
    runs["arm"] = runs["tags.ablation.arm"] if "tags.ablation.arm" in runs else pd.Series(dtype=str)
    runs["seed"] = runs["tags.seed"] if "tags.seed" in runs else pd.Series(dtype=str)
    baseline = _baseline_of(runs, parent)
    arms = _arm_order(runs, parent, baseline)
    finished = runs[runs["status"] == "FINISHED"].sort_values("start_time", kind="stable")
    finished = finished.drop_duplicates(["arm", "seed"], keep="last").reset_index(drop=True)
    return Ablation(parent.name, parent, baseline, arms, runs, finished, curves, finetunes, token_gaps, sv_hists)


def slim_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """The columns of a runs frame a report reads (RUN_COLUMNS, KEEP_*, derived.*): RUN_COLUMNS in their order,
    then params.*, tags.*, metrics.* and derived.* each by name."""
    def kept(col: str) -> bool:
        kind, _, key = col.partition(".")
        wanted = {"params": KEEP_PARAMS, "tags": KEEP_TAGS, "metrics": KEEP_METRICS}.get(kind)
        if col in RUN_COLUMNS or kind == "derived":
            return True
        return wanted is not None and any(key == w or (w[-1] in "./" and key.startswith(w)) for w in wanted)

    # Within params, tags and metrics by name: the store's order is its rows' first-seen keys, which differ
    # between a store that ran the runs and one they were restored into (sweeps/evidence/restore.py).
    kinds = {"params": 1, "tags": 2, "metrics": 3}
    columns = sorted((c for c in frame.columns if kept(c)), key=lambda c: (
        (0, RUN_COLUMNS.index(c), "") if c in RUN_COLUMNS else (kinds.get(c.partition(".")[0], 4), 0, c)))
    return typed_runs(frame[columns].reset_index(drop=True))


def typed_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Fixed dtypes per column kind: metrics.* and derived.* float64, run times datetime64[ms], the rest
    (ids, params, tags: MLflow stores them as text) str. The store path and the CSV path both end here."""
    dtypes = {c: run_column_dtype(c) for c in frame.columns}
    return frame.astype(dtypes)


def run_column_dtype(col: str) -> str:
    if col.startswith(("metrics.", "derived.")):
        return "float64"
    if col in ("start_time", "end_time"):
        return "datetime64[ms]"
    return "str"


def _baseline_of(runs: pd.DataFrame, parent: ParentRecord) -> str:
    col = "params.ablation.baseline"
    if col in runs and runs[col].notna().any():
        return str(runs[col].dropna().iloc[0])
    return str(parent.params.get("ablation.baseline", ""))


def _arm_order(runs: pd.DataFrame, parent: ParentRecord, baseline: str) -> list[str]:
    """Grouped by variant (the baseline's variant first, then the preset's order, then by name); within a
    variant the baseline's family first, then the order of the preset's arm list (the parent's `arms`).
    A fine-tune tuning base (`<arm>@ft_tuning`) is no arm: it only chose its arm's fine-tune rate."""
    present = [a for a in runs["arm"].dropna().unique() if not is_finetune_tuning_base(a)] if "arm" in runs else []
    listed = [a.strip().rsplit("/", 1)[-1] for a in parent.params.get("arms", "").split(",") if a.strip()]
    families = {f: i for i, f in enumerate(dict.fromkeys(split_arm(a)[0] for a in listed))}
    variants = {v: i for i, v in enumerate(dict.fromkeys([split_arm(baseline)[1], *(split_arm(a)[1] for a in listed)]))}
    base_family = split_arm(baseline)[0]

    def key(arm: str):
        family, variant = split_arm(arm)
        return (variants.get(variant, len(variants)), variant, family != base_family,
                families.get(family, len(families)), arm)

    return sorted(present, key=key)


# ---------------------------------------------------------------------------------------- values


def better_direction(metric: str) -> str:
    name = metric.rsplit("/", 1)[-1].lower()
    return "lower" if any(w in name for w in LOWER_IS_BETTER_WORDS) or metric.startswith("val/") else "higher"


def eval_metrics(ab: Ablation) -> list[str]:
    """Final `eval/<task>/<metric>` names present in the finished runs (no stderr, no timing)."""
    names = sorted(c[len("metrics."):] for c in ab.finished.columns if c.startswith("metrics.eval/"))
    return [n for n in names if n.count("/") >= 2 and "stderr" not in n and not n.endswith(f"/{ITEMS}")]


def run_value(ab: Ablation, row: pd.Series, metric: str) -> float:
    """One run's final value of a metric, a pattern (mean over matches) or a fine-tune metric."""
    if metric.startswith(FINETUNE_PREFIX):
        return _finetune_value(ab, row["run_id"], metric[len(FINETUNE_PREFIX):])
    return _pattern_mean(row, metric)


def arm_values(ab: Ablation, arm: str, metric: str) -> dict[str, float]:
    rows = ab.finished[ab.finished["arm"] == arm]
    return {row["seed"]: run_value(ab, row, metric) for _, row in rows.iterrows()}


def metric_pattern(pattern: str) -> re.Pattern:
    """A metric pattern whose `*` matches within one path segment: `eval/*/acc` is every zero-shot task's
    accuracy and never a probe's `eval/probe/layer_0/acc` (fnmatch's `*` would cross the `/`)."""
    return re.compile("".join("[^/]*" if ch == "*" else re.escape(ch) for ch in pattern) + r"\Z")


def _matching(row: pd.Series, metric: str) -> list[float]:
    wanted = metric_pattern(metric)
    return [float(v) for c, v in row.items()
            if isinstance(c, str) and c.startswith("metrics.") and wanted.match(c[8:]) and pd.notna(v)]


def _pattern_mean(row: pd.Series, metric: str) -> float:
    if "*" not in metric:
        value = row.get(f"metrics.{metric}")
        return float(value) if value is not None and pd.notna(value) else float("nan")
    values = _matching(row, metric)
    return float(np.mean(values)) if values else float("nan")


def _first_run(ab: Ablation, arm: str, metric: str) -> tuple[pd.Series | None, str]:
    """An arm's first finished run (its first fine-tune for `finetune:`) and the metric name inside it."""
    if metric.startswith(FINETUNE_PREFIX):
        frame, metric = ab.finetunes, metric[len(FINETUNE_PREFIX):]
        ids = set(ab.run_ids(arm).values())
        frame = frame[frame["tags.finetune.base_run_id"].isin(ids)] if "tags.finetune.base_run_id" in frame else frame.iloc[0:0]
    else:
        frame = ab.finished[ab.finished["arm"] == arm]
    return (None if frame.empty else frame.iloc[0]), metric


def matched_metrics(ab: Ablation, arm: str, metric: str) -> int:
    """How many metrics a pattern averages for an arm's first finished run (its fine-tunes' for `finetune:`)."""
    row, metric = _first_run(ab, arm, metric)
    if row is None:
        return 0
    return len(_matching(row, metric)) if "*" in metric else 1


def items_scored(ab: Ablation, arm: str, metric: str) -> int:
    """The items behind an eval metric or pattern for an arm's first run: the sum of its tasks' logged
    `eval/<task>/items`; 0 when the runs predate that metric."""
    row, metric = _first_run(ab, arm, metric)
    if row is None or not metric.startswith("eval/"):
        return 0
    return int(sum(_matching(row, metric.rsplit("/", 1)[0] + f"/{ITEMS}")))


def _finetune_value(ab: Ablation, base_run_id: str, metric: str) -> float:
    if ab.finetunes.empty or "tags.finetune.base_run_id" not in ab.finetunes:
        return float("nan")
    rows = ab.finetunes[(ab.finetunes["tags.finetune.base_run_id"] == base_run_id) & (ab.finetunes["status"] == "FINISHED")]
    values = [v for _, r in rows.iterrows() if math.isfinite(v := _pattern_mean(r, metric))]
    return float(np.mean(values)) if values else float("nan")


# ---------------------------------------------------------------------------------------- scale


def scale_of(ab: Ablation, arms: list[str], paper_tpp: float | None = None) -> Scale:
    """Median size and budget of these arms' finished runs (an arm and its reference: one model rung)."""
    rows = ab.finished[ab.finished["arm"].isin(arms)]

    def median(col: str) -> float:
        return float(numeric(rows[col]).median()) if col in rows and not rows.empty else float("nan")

    variant = split_arm(arms[0])[1] if arms else ""
    # A mixture of experts records the non-embedding parameters a token uses: its TPP counts those
    # (lit_modules/model/counting.py); a dense run records none and its count is the plain one.
    active = median("params.budget.params_active_non_embedding")
    non_embedding = active if math.isfinite(active) else median("params.budget.params_non_embedding")
    return Scale(median("params.budget.params_total"), non_embedding, median("params.budget.total_tokens"),
                 paper_tpp, variant)


def scale_table(ab: Ablation, claim: Claim) -> pd.DataFrame:
    """Per arm: variant, parameters (total, non-embedding), tokens, TPP, finished seeds."""
    rows = []
    for arm in ab.arms:
        s = scale_of(ab, [arm], claim.tpp_of_paper(arm))
        rows.append({"arm": arm, "variant": s.variant or "-", "params_total": s.params_total,
                     "params_non_embedding": s.params_non_embedding, "tokens": s.tokens, "tpp": s.tpp,
                     "paper_tpp": s.paper_tpp if s.paper_tpp else float("nan"), "matched": s.matched,
                     "seeds": len(ab.run_ids(arm))})
    return pd.DataFrame(rows)
