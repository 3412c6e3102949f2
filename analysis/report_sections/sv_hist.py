"""Singular-value histograms: the runs' own (diagnostic `sv_hist`), last step, first seed per arm."""

from __future__ import annotations

from analysis.report_context import ReportContext
from analysis.results_data import safe_name
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    body = []
    for h in ctx.ab.sv_hists:
        target = ctx.out / f"sv_hist_{safe_name(h.arm)}.png"
        target.write_bytes(h.png)
        body += [f"**`{h.arm}`, seed {h.seed}, `{h.artifact}`**", "", f"![sv hist {h.arm}]({target.name})", ""]
    return Section("Singular-value histograms (from the runs' `sv_hist` diagnostic)", body)
