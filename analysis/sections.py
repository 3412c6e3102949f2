"""What every report is made of: its folder (made fresh), its sections, and where reports go."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

REPORTS_ENV = "LLM_REPORTS_DIR"
REPORT_FILE = "report.md"
ARTIFACT_PATH = "report"  # where a report is logged in its parent run's artifacts


def reports_root(reports_dir: str | Path | None = None) -> Path:
    """The argument, else $LLM_REPORTS_DIR, else ./reports."""
    return Path(reports_dir or os.environ.get(REPORTS_ENV) or "reports")


@dataclass
class Section:
    title: str
    body: list[str] = field(default_factory=list)

    def render(self) -> str:
        return "\n".join([f"## {self.title}", "", *self.body, ""])


# A results folder's hand-written reading of its numbers (analysis.ledger shows it): never a generated file.
FINDINGS_FILE = "findings.md"


def fresh_dir(path: Path) -> None:
    """The report folder holds one report: files of an older one (a plot no longer drawn) are removed."""
    if path.is_dir():
        for child in path.iterdir():
            if child.is_file() and child.suffix in (".md", ".html", ".png", ".csv") and child.name != FINDINGS_FILE:
                child.unlink()
        if (path / "summary").is_dir():
            shutil.rmtree(path / "summary")
    path.mkdir(parents=True, exist_ok=True)


def first_value(frame: pd.DataFrame, col: str) -> str:
    if col not in frame or frame[col].dropna().empty:
        return "?"
    return str(frame[col].dropna().iloc[0])
