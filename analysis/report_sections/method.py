"""Method: pairing, the bootstrap, the sign-flip test, multiplicity, the step convention, where data are."""

from __future__ import annotations

from analysis.report_context import ReportContext
from analysis.results_data import CURVES_FILE, DATA_DIR
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    return Section("Method", [
        "- Pairing: runs of different arms with the same seed share data order and initial draw; statistics "
        "use the per-seed differences (arm - reference).",
        "- Bootstrap: 10,000 resamples of the seeds with replacement, percentile 95% interval, fixed RNG seed.",
        "- Sign-flip test: all 2^n sign patterns of the differences for n <= 16 (exact), Monte Carlo above.",
        "- Multiplicity: Holm's step-down adjustment over the report's (arm x check) tests.",
        "- Step convention: a metric at step k was measured after optimizer step k (0-based); tokens seen = "
        "(k + 1) x tokens per step.",
        "- Tables are also saved as CSV next to this file; every curve is in the MLflow store (`make mlflow-ui`) "
        f"and, in an exported results folder, thinned to the points a report reads, in `{DATA_DIR}/{CURVES_FILE}`.",
    ])
