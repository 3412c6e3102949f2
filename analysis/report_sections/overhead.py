"""Overhead: wall time per training token, arm against reference."""

from __future__ import annotations

import numpy as np

from analysis import markdown as md
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    cost = ctx.cost
    if cost.empty or not np.isfinite(cost["us_per_token"].to_numpy(dtype=float)).any():
        return Section("Overhead", [])
    body = ["Wall time per training token: median of the run's `tokens_per_s` logs (the first, warm-up "
            "one left out); ratio = geometric mean over seeds of arm / reference. Runs sharing a busy machine "
            "make this noisy; compare it with the spread between seeds.", ""]
    body.append(md.table(cost, [("arm", "arm"), ("reference", "reference"), ("n", "paired seeds"),
                                ("us_per_token", "µs per token"), ("ratio", "time ratio"),
                                ("ratio_min", "min"), ("ratio_max", "max")]))
    return Section("Overhead: wall time per token", body)
