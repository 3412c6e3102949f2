"""Seed noise of the references: the seed sd and the MDD their seeds would detect."""

from __future__ import annotations

from analysis import markdown as md
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    body = ["Two different numbers, per reference arm, measured on the reference alone: the *seed sd* is the "
            "seed-to-seed standard deviation of its final values; the *MDD* here is the paired mean difference "
            "these seeds would detect with 80% power at the 5% level, taking the spread of a per-seed difference "
            "as sqrt(2) x seed sd (conservative: pairing usually removes more). The verdict table's MDD uses each "
            "comparison's own paired spread at its own level.", ""]
    body.append(md.table(ctx.noise, [("metric", "metric"), ("reference", "reference"), ("n", "seeds"),
                                     ("mean", "mean"), ("seed_sd", "seed sd"), ("mdd", "MDD")]))
    return Section("Seed noise of the references: seed sd and MDD", body)
