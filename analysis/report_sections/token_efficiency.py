"""Token efficiency: the tokens each arm needs to reach its reference's final val/loss."""

from __future__ import annotations

from analysis import markdown as md
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    speed = ctx.speed
    if speed.empty:
        return Section("Token efficiency", [])
    body = ["Tokens each arm needs to reach its paired reference seed's final val/loss (linear interpolation "
            "between evaluations; `never` = not reached within the budget), mean over seeds. Speedup (the "
            "papers' reading) = the reference's budget / the arm's tokens; first crossing = the reference's own "
            "first crossing of its final loss / the arm's (it follows noise where the reference's tail is flat); "
            "both geometric means over seeds. An arm that did not reach the target on some seed has no speedup.", ""]
    body.append(md.table(speed, [
        ("arm", "arm"), ("reference", "reference"), ("n", "seeds"), ("ref_budget", "reference budget"),
        ("ref_tokens", "reference first crossing"), ("arm_tokens", "arm tokens"), ("speedup", "speedup"),
        ("speedup_first_crossing", "first-crossing speedup"), ("per_seed", "per seed"), ("summary", "summary"),
    ]))
    return Section("Token efficiency: tokens to reach the reference's final val/loss", body)
