"""The sections of an ablation's report, in the order they appear: each is a function of the report's
context (analysis/report_context.py: the ablation, its claim, the folder, the provenance and the tables
computed once) that returns a `Section`; one with an empty body is left out.

A new section is a module here with `def section(ctx: ReportContext) -> Section`, and its line in SECTIONS.
"""

from __future__ import annotations

from typing import Callable

from analysis.report_context import ReportContext
from analysis.report_sections import (
    claim, derived, effects, figures, header, measured, method, overhead, per_arm, plasticity, runs, seed_noise,
    sv_hist, token_efficiency, token_gap, verdicts,
)
from analysis.sections import Section

SECTIONS: list[Callable[[ReportContext], Section]] = [
    header.section,
    claim.section,
    measured.section,
    derived.lr_tuning,
    verdicts.section,
    derived.trend,
    derived.prediction,
    per_arm.section,
    effects.section,
    seed_noise.section,
    token_efficiency.section,
    overhead.section,
    figures.section,
    plasticity.section,
    token_gap.section,
    sv_hist.section,
    runs.section,
    method.section,
]
