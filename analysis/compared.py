"""The Ablation every comparison reads, the report's and the ledger's alike.

    ab = as_compared(read_results_data(folder), provenance)

Two things a protocol runs are not compared: the cells of its declared learning-rate grids (`<arm>@lr<rate>` on
the tuning seeds, and a fine-tune grid's `<arm>@ft_tuning` bases) chose the rates the test cells ran at, so
they appear only in the learning-rate section (analysis/lr_tuning_report.py) and in the inventory of runs, never
as arms of their own in a verdict, effect or per-arm row; and a fine-tuned base's fine-tunes count only at the
rate its arm's fine-tune grid chose (analysis/finetune_lr_tuning.py). The runs themselves stay in `ab.runs`, from
which the learning-rate section and the edge-rate gate rebuild each grid.
"""

from __future__ import annotations

from dataclasses import replace

from analysis.ablation import Ablation
from analysis.finetune_lr_tuning import FINETUNE_RATE_KEY, at_chosen_rates, tuning_base_arm
from analysis.lr_tuning import declared_tunings


def tuning_arms(provenance: dict | None) -> set[str]:
    """Every arm name a declared grid's cells may run as: each rate it may grow to, or a fine-tune grid's bases."""
    names: set[str] = set()
    for tuning in declared_tunings(provenance):
        if tuning.key == FINETUNE_RATE_KEY:
            names |= {tuning_base_arm(a) for a in tuning.arms}
        else:
            names |= {tuning.cell_arm(a, r) for a in tuning.arms for r in tuning.lattice()}
    return names


def as_compared(ab: Ablation, provenance: dict | None) -> Ablation:
    """`ab` without its tuning cells as arms (or finished runs), its fine-tunes at the chosen fine-tune rates."""
    out = ab
    chosen = (provenance or {}).get("finetune_lr_tuning_chosen")
    if chosen:
        out = replace(out, finetunes=at_chosen_rates(ab.finetunes, ab.runs, chosen))
    tuning = tuning_arms(provenance)
    if tuning & set(ab.arms):
        out = replace(out, arms=[a for a in ab.arms if a not in tuning],
                      finished=ab.finished[~ab.finished["arm"].isin(tuning)])
    return out
