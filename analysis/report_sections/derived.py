"""The sections whose tables are derived files of their own (each module also writes them for `make
ledger`): the learning-rate tuning, the trend over model sizes and the prediction from it."""

from __future__ import annotations

from analysis.lr_tuning_report import lr_tuning_section
from analysis.prediction import prediction_section
from analysis.report_context import ReportContext
from analysis.sections import Section
from analysis.trend_report import trend_section


def lr_tuning(ctx: ReportContext) -> Section:
    """Over every run as it ran: it says which rates the test bases' fine-tunes ran at."""
    return lr_tuning_section(ctx.ran, ctx.provenance, ctx.out)


def trend(ctx: ReportContext) -> Section:
    return trend_section(ctx.ab, ctx.verdicts, ctx.out)


def prediction(ctx: ReportContext) -> Section:
    return prediction_section(ctx.verdicts, ctx.out)
