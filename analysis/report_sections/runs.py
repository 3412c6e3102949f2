"""Runs: every child run, by arm then seed, whether it entered the statistics."""

from __future__ import annotations

from analysis import markdown as md
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    return Section("Runs", [md.table(ctx.runs, [
        ("arm", "arm"), ("seed", "seed"), ("status", "status"), ("counted", "counted"),
        ("val_loss", "final val/loss"), ("run_id", "run id"), ("end_reason", "end reason"),
    ])])
