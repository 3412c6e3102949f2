"""An ablation's reproduction report, rendered from an `Ablation` (never from the store): report.md, its
figures and a CSV of every table, in one folder.

It states the paper's claim (analysis/claims.py), the scale of every arm (parameters, tokens, tokens per
parameter, seeds), what the runs measured (paired-seed differences with Student-t intervals, t and sign-flip
tests, the reference's seed sd and MDD, tokens to reach the reference's final loss, wall-time overhead), a
verdict per arm and check under the explicit rule (analysis/verdict.py), the learning rate each tuned arm
got (analysis/lr_tuning_report.py), each primary check's trend over model sizes (analysis/trend_report.py),
the figures whose data exist (the core ones and those each technique declares in its report.yaml) and, when
the grid's runs were fine-tuned, the plasticity table (analysis/plasticity.py).

The sections are analysis/report_sections/ (SECTIONS, in order), each a function of one `ReportContext`
(analysis/report_context.py) holding the ablation, the claim, the folder, the provenance and the tables.
"""

from __future__ import annotations

from pathlib import Path

from analysis.ablation import Ablation
from analysis.claims import Claim
from analysis.report_context import ReportContext, write_tables
from analysis.report_sections import SECTIONS


def render_ablation(ab: Ablation, claim: Claim, out: Path, provenance: dict | None = None) -> str:
    ctx = ReportContext.of(ab, claim, out, provenance)
    write_tables(ctx)
    sections = [make(ctx) for make in SECTIONS]
    return "\n".join([f"# Reproduction report: `{ctx.ab.name}`", ""]
                     + [s.render() for s in sections if s is not None and s.body])
