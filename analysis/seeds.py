"""The one order of seeds in tables, pairings and listings: numbers as numbers ("2" before "10"), names after."""

from __future__ import annotations


def seed_key(seed: str) -> tuple[int, float | str]:
    try:
        return 0, float(seed)
    except (TypeError, ValueError):
        return 1, str(seed)
