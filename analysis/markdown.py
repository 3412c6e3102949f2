"""Markdown tables and number formatting for reports (no dependency beyond pandas)."""

from __future__ import annotations

import math
from typing import Callable, Sequence

import pandas as pd

Formatter = Callable[[object], str]


def fmt(value: object, digits: int = 4) -> str:
    """Numbers with `digits` significant digits; NaN as an en dash; +inf as 'never'."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        if math.isinf(value):
            return "never" if value > 0 else "-inf"
        if 1000 <= abs(value) < 1e15:
            return f"{value:,.0f}"  # token and parameter counts
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.{max(1, digits - 1)}e}"
        return f"{value:.{digits}g}"
    return str(value)


def sig3(value: object) -> str:
    """Three significant digits, also for a number written as text (an MLflow param or tag); other
    text as it is. Tables show this; the exact values stay in their CSV."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        if value.strip().lstrip("+-").isdigit():
            return fmt(int(number))
        return fmt(number, 3)
    if isinstance(value, float):
        return fmt(value, 3)
    return fmt(value)


def signed(value: object, digits: int = 3) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:+.{digits}g}"
    return fmt(value)


def pvalue(value: object) -> str:
    if isinstance(value, float) and math.isfinite(value):
        return "<0.001" if value < 0.001 else f"{value:.3f}"
    return fmt(value)


def table(frame: pd.DataFrame, columns: Sequence[tuple[str, str]], formatters: dict[str, Formatter] | None = None) -> str:
    """A Markdown table of `columns` = [(column, header)]; missing columns print as en dashes."""
    formatters = formatters or {}
    if frame is None or frame.empty:
        return "_(none)_"
    lines = ["| " + " | ".join(h for _, h in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for _, row in frame.iterrows():
        cells = []
        for col, _ in columns:
            value = row[col] if col in row.index else None
            text = formatters.get(col, fmt)(value)
            cells.append(str(text).replace("|", "\\|").replace("\n", " "))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
