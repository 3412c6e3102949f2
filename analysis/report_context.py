"""What every section of an ablation's report reads: the ablation, its claim, the folder and provenance, and
the tables computed from them once (verdicts, effects, seed noise, speedups, overhead, scale, per-arm summary).

    ctx = ReportContext.of(ab, claim, out, provenance)
    section = SECTIONS[i](ctx)          # analysis/report_sections: one signature for every section

A table is computed the first time a section (or `write_tables`) asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.ablation import Ablation, eval_metrics, scale_table
from analysis.claims import Claim
from analysis.comparisons import (
    arm_summary_table, effects_table, overhead_table, seed_noise_table, speedups_table,
)
from analysis.exploratory import gated
from analysis.families import Families, families_for
from analysis.compared import as_compared
from analysis.seeds import seed_key
from analysis.verdict_table import verdicts_table


@dataclass
class ReportContext:
    ab: Ablation  # as compared: a fine-tuned grid's fine-tunes at the rates its test bases were chosen with
    ran: Ablation  # every run as it ran (the learning-rate section says which rates the fine-tunes ran at)
    claim: Claim
    out: Path  # the report's folder: a section that draws a figure or writes a table puts it here
    provenance: dict | None = None

    @classmethod
    def of(cls, ab: Ablation, claim: Claim, out: Path, provenance: dict | None = None) -> ReportContext:
        return cls(as_compared(ab, provenance), ab, claim, out, provenance)

    @cached_property
    def families(self) -> Families:
        return families_for(self.ab.name, self.provenance)  # the checks the folder recorded, else the protocol's

    @cached_property
    def verdicts(self) -> pd.DataFrame:
        return gated(verdicts_table(self.ab, self.claim, self.families), self.ran, self.provenance)

    @cached_property
    def metrics(self) -> list[str]:
        """The final metrics the tables compare: the losses and each evaluation a finished run logged."""
        metrics = ["val/loss", "val/bits_per_byte", *eval_metrics(self.ab)]
        return [m for m in metrics if f"metrics.{m}" in self.ab.finished]

    @cached_property
    def effects(self) -> pd.DataFrame:
        return effects_table(self.ab, self.claim, self.metrics)

    @cached_property
    def noise(self) -> pd.DataFrame:
        return seed_noise_table(self.ab, self.claim, self.metrics)

    @cached_property
    def speed(self) -> pd.DataFrame:
        return speedups_table(self.ab, self.claim)

    @cached_property
    def cost(self) -> pd.DataFrame:
        return overhead_table(self.ab, self.claim)

    @cached_property
    def scale(self) -> pd.DataFrame:
        return scale_table(self.ab, self.claim)

    @cached_property
    def summary(self) -> pd.DataFrame:
        """Every arm on its own, over the compared metrics and every metric a check reads."""
        checked = [c.metric for c in self.claim.checks if c.metric != "speedup" and c.metric not in self.metrics]
        return arm_summary_table(self.ab, [*self.metrics, *dict.fromkeys(checked)])

    @cached_property
    def runs(self) -> pd.DataFrame:
        """Every child run, by arm then seed: whether it entered the statistics (a rate-tuning cell enters the
        learning-rate section instead), its final val/loss."""
        ab = self.ab
        if ab.runs.empty:
            return pd.DataFrame()
        tuning = ab.runs["arm"].isin(set(self.ran.arms) - set(ab.arms))
        counted = ab.runs["run_id"].isin(ab.finished["run_id"]).map({True: "yes", False: "no"})
        frame = ab.runs.assign(
            val_loss=ab.runs.get("metrics.val/loss", pd.Series(np.nan, index=ab.runs.index)),
            end_reason=ab.runs.get("tags.end_reason", pd.Series("", index=ab.runs.index)),
            counted=counted.where(~tuning, "rate tuning"),
        )
        order = {a: i for i, a in enumerate(self.ran.arms)}
        frame = frame.assign(_o=frame["arm"].map(order), _s=frame["seed"].map(seed_key))
        frame = frame.sort_values(["_o", "_s", "start_time"], kind="stable")
        return frame[["arm", "seed", "status", "counted", "val_loss", "run_id", "end_reason"]]


TABLES = ("verdicts", "effects", "arm_summary", "seed_noise", "speedup", "overhead", "scale", "runs")


def write_tables(ctx: ReportContext) -> None:
    """Each non-empty table as `<name>.csv` beside report.md."""
    frames = (ctx.verdicts, ctx.effects, ctx.summary, ctx.noise, ctx.speed, ctx.cost, ctx.scale, ctx.runs)
    for name, frame in zip(TABLES, frames):
        if not frame.empty:
            frame.to_csv(ctx.out / f"{name}.csv", index=False)
