"""The paper's claim: its statement, its scale and the checks made here."""

from __future__ import annotations

from analysis.report_context import ReportContext
from analysis.scale import count
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    claim = ctx.claim
    checks = []
    for c in claim.checks:
        line = f"- `{c.metric}` ({c.better} is better{', each side at its best LR' if c.tuned else ''}): {c.paper}"
        checks.append(line + (f" Paper effect in our units: {c.assumption}." if c.assumption else ""))
    return Section("The paper's claim", [
        f"**Paper:** {claim.paper}", "", claim.statement, "",
        f"**Paper's scale:** {claim.paper_scale}; {count(claim.paper_tokens) if claim.paper_tokens else 'unknown'} "
        f"training tokens; {claim.paper_tpp_note}.", "", "**Checks made here:**", "", *checks,
    ])
