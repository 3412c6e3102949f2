"""The derived tables of an exported results folder, checked against what its `data/` gives.

`make ledger` re-derives every verdict from `results/<paper>/data/`; a hand-edited or stale `verdicts.csv` (or
trend, rungs, prediction table) beside it would otherwise go unnoticed, since RESULTS.md never reads it. Each
table is rendered again into a scratch folder exactly as the report writes it and compared byte for byte; one
that differs is rewritten and named, so the ledger run says which files were not what their data give (the
report's text and figures are redrawn by `make report FROM=results/<paper>`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

from analysis.ablation import Ablation
from analysis.prediction import PREDICTION_FILE, write_prediction
from analysis.trend_report import RUNGS_FILE, TREND_FILE, trend_section

VERDICTS_FILE = "verdicts.csv"
DERIVED = (VERDICTS_FILE, TREND_FILE, RUNGS_FILE, PREDICTION_FILE)


def refresh_derived(folder: Path, ab: Ablation, verdicts: pd.DataFrame) -> list[str]:
    """Rewrite each derived table of `folder` that differs from its re-derivation; return their names."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        if not verdicts.empty:
            verdicts.to_csv(fresh / VERDICTS_FILE, index=False)
        trend_section(ab, verdicts, fresh)
        write_prediction(verdicts, fresh)
        changed = []
        for name in DERIVED:
            new, old = fresh / name, folder / name
            if not new.is_file():
                if old.is_file() and name == PREDICTION_FILE:  # no 4-rung trend any more: the table goes
                    old.unlink()
                    changed.append(name)
                continue
            if not old.is_file() or old.read_bytes() != new.read_bytes():
                tmp = old.with_name(f".{name}.{os.getpid()}.tmp")
                tmp.write_bytes(new.read_bytes())
                tmp.replace(old)
                changed.append(name)
    return changed
