"""What each technique folder tells the reports: `lit_modules/techniques/<name>/report.yaml`, read as data.

    claim:          the paper's claim (analysis.claims turns it into a Claim; its key is the folder's name)
    curves:         metric prefixes whose histories a report reads (besides the losses)
    final_metrics:  metric prefixes whose final values a report reads (besides val/, eval/, diag/, ...)
    figures:        figures declared by kind (analysis.declared_figures.FIGURE_KINDS), panels, titles and file name

The files are read from disk, never imported: analysis (and a run describing itself, tracking.system_tags)
does not import the model or the techniques, and a new technique's folder is all a report needs to show its
claim, curves and figures.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import yaml

REPORT_FILE = "report.yaml"
KEYS = ("claim", "curves", "final_metrics", "figures")


class TechniqueReportError(ValueError):
    """A report.yaml that cannot be read as the format above."""


@dataclass(frozen=True)
class TechniqueReport:
    name: str
    claim: dict | None
    curves: tuple[str, ...] = ()
    final_metrics: tuple[str, ...] = ()
    figures: tuple[dict, ...] = ()


def techniques_dir() -> Path:
    """lit_modules/techniques/, found without importing it (importing it loads every technique)."""
    spec = importlib.util.find_spec("lit_modules")
    return Path(next(iter(spec.submodule_search_locations))) / "techniques"


@functools.cache
def technique_reports() -> tuple[TechniqueReport, ...]:
    """Every technique folder's report metadata, by folder name."""
    return tuple(read_report(path) for path in sorted(techniques_dir().glob(f"*/{REPORT_FILE}")))


def read_report(path: Path) -> TechniqueReport:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise TechniqueReportError(f"{path} is not valid YAML: {str(err).splitlines()[0]}") from None
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise TechniqueReportError(f"{path} has unknown key(s) {', '.join(unknown)} (allowed: {', '.join(KEYS)}).")
    return TechniqueReport(
        name=path.parent.name, claim=data.get("claim"), curves=tuple(data.get("curves") or ()),
        final_metrics=tuple(data.get("final_metrics") or ()), figures=tuple(data.get("figures") or ()),
    )


def curve_prefixes() -> tuple[str, ...]:
    return tuple(p for r in technique_reports() for p in r.curves)


def final_metric_prefixes() -> tuple[str, ...]:
    return tuple(p for r in technique_reports() for p in r.final_metrics)


def figure_specs() -> tuple[dict, ...]:
    return tuple(f for r in technique_reports() for f in r.figures)
