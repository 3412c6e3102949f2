"""The fixed columns and dtypes of an ablation's curve and token-gap tables, so a table read from the store,
one read from an export's CSV files and an empty one look alike (runs: analysis.ablation.typed_runs)."""

from __future__ import annotations

import pandas as pd

from analysis.load_runs import CURVE_COLUMNS
from analysis.token_gap import COLUMNS as GAP_COLUMNS

CURVE_DTYPES = {"run_id": "str", "key": "str", "step": "int64", "tokens_seen": "float64", "value": "float64"}
TOKEN_GAP_COLUMNS = ("arm", "reference", "seed", "note", *GAP_COLUMNS)


def typed_curves(frame: pd.DataFrame) -> pd.DataFrame:
    """Curves with fixed columns and dtypes."""
    return frame[list(CURVE_COLUMNS)].astype(CURVE_DTYPES).reset_index(drop=True)


def empty_token_gaps() -> pd.DataFrame:
    """The token-gap table with no rows: its columns and dtypes."""
    return pd.DataFrame({c: pd.Series(dtype="int64" if c == "count" else "float64" if c in GAP_COLUMNS[2:] else "str")
                         for c in TOKEN_GAP_COLUMNS})
