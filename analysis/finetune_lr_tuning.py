"""The fine-tune's rate chosen per base arm on bases pre-trained on tuning seeds: the tuning frame.

    tuning = LrTuning(arms, grid=(3e-4, 1e-3, 3e-3), tuning_seeds=(100, 101),
                      metric="finetune/target_loss_after", key="finetune.lr")
    frame = tuning_runs(runs, finetunes)      # one row per fine-tune of a tuning base, as a tuning cell
    table = tuning_table(tuning, frame)       # analysis/lr_tuning.py's table and rule, unchanged

A fine-tune recipe gives every base one rate, but a base pre-trained with more weight decay sits elsewhere
on the target's loss surface and may want another: judged at one rate, "plasticity" can be the rate's fit.
So each tuned arm pre-trains on the tuning seeds as `<arm>@ft_tuning` (the arm's own config; no comparison
reads it), each of those bases is fine-tuned at every rate of the grid, and the arm's rate is the one with
the best mean `metric` over the tuning seeds; its test bases (the seeds the verdicts use) are fine-tuned at
that rate only (sweeps/finetune_tuning.py). Here each fine-tune of a tuning base becomes the row of a tuning
cell (`<arm>@lr<rate>`, the base's seed, the fine-tune's status and metrics), so the choice, the table and
the plot are analysis/lr_tuning.py's, from the store (driver) or the exported CSVs (report) alike.
"""

from __future__ import annotations

import pandas as pd

from analysis.claims import (FINETUNE_TUNING_VARIANT, LR_VARIANT_PREFIX, finetune_tuned_arm, is_finetune_tuning_base,
                             join_arm)
from analysis.lr_tuning import rate_text
from lit_modules.runs import tags

FINETUNE_RATE_KEY = "finetune.lr"  # the key a fine-tune grid tunes (the recipe field; the run's optim.lr)
BASE_COLUMNS = ("run_id", "arm", "seed")
FINETUNE_COLUMNS = (f"tags.{tags.FINETUNE_BASE}", "status", "start_time", "params.optim.lr")


def tuning_base_arm(arm: str) -> str:
    """The grid arm a tuning base of `arm` runs as: `tpp20_wd0.5` -> `tpp20_wd0.5@ft_tuning`."""
    return join_arm(arm, FINETUNE_TUNING_VARIANT)


def tuning_runs(runs: pd.DataFrame, finetunes: pd.DataFrame) -> pd.DataFrame:
    """Each fine-tune of a tuning base as a tuning cell of analysis/lr_tuning.py: arm `<arm>@lr<its rate>`,
    the base's seed, the fine-tune's status, start time, end reason and metrics.*; empty without either."""
    empty = pd.DataFrame(columns=["arm", "seed", "status", "start_time", "tags.end_reason"])
    if runs.empty or finetunes.empty or not set(BASE_COLUMNS) <= set(runs) or not set(FINETUNE_COLUMNS) <= set(finetunes):
        return empty
    bases = runs[runs["arm"].map(is_finetune_tuning_base)]
    of_base = {r["run_id"]: (finetune_tuned_arm(r["arm"]), str(r["seed"])) for _, r in bases.iterrows()}
    rows = []
    for _, ft in finetunes.iterrows():
        base = of_base.get(ft[f"tags.{tags.FINETUNE_BASE}"])
        if base is None:
            continue
        rate = float(ft["params.optim.lr"])
        rows.append({"arm": join_arm(base[0], LR_VARIANT_PREFIX + rate_text(rate)), "seed": base[1],
                     "status": ft["status"], "start_time": ft["start_time"],
                     "tags.end_reason": ft.get("tags.end_reason", ""),
                     **{c: ft[c] for c in finetunes.columns if str(c).startswith("metrics.")}})
    return pd.DataFrame(rows) if rows else empty


def at_chosen_rates(finetunes: pd.DataFrame, runs: pd.DataFrame, chosen: dict[str, float] | None) -> pd.DataFrame:
    """The fine-tunes a comparison reads: of a test base whose arm had its fine-tune rate chosen (`chosen`, the
    provenance's finetune_lr_tuning_chosen), only those at that rate. A protocol stopped and resumed with a
    wider grid keeps its earlier test fine-tunes at a rate no longer chosen; averaged in, they would mix two
    rates into one base's value. Tuning bases' fine-tunes, and any base of an arm without a choice, stay."""
    base_col = f"tags.{tags.FINETUNE_BASE}"
    if not chosen or finetunes.empty or base_col not in finetunes or "params.optim.lr" not in finetunes:
        return finetunes
    arm_of = dict(zip(runs["run_id"], runs["arm"]))
    rate = pd.to_numeric(finetunes["params.optim.lr"], errors="coerce")
    wanted = finetunes[base_col].map(lambda b: chosen.get(arm_of.get(b, ""), float("nan")))
    off_rate = wanted.notna() & ~((rate - wanted).abs() <= 1e-9 * wanted.abs())
    return finetunes[~off_rate]
