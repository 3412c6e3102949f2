"""Per arm: every arm on its own, mean and sd over its seeds."""

from __future__ import annotations

from analysis import markdown as md
from analysis.ablation import TRAIN_TAIL
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    summary = ctx.summary
    if summary.empty:
        return Section("Per arm", [])
    body = ["Every arm on its own: final values, mean and sample standard deviation over its finished seeds "
            "(sd needs 2 seeds), with the smallest and largest seed. The train loss is the mean of the last "
            f"{TRAIN_TAIL} logged `train/loss` values of a run (each one micro-batch).", ""]
    body.append(md.table(summary, [("metric", "metric"), ("arm", "arm"), ("n", "seeds"), ("mean", "mean"),
                                   ("sd", "sd"), ("min", "min"), ("max", "max")]))
    return Section("Per arm: mean ± sd over seeds", body)
