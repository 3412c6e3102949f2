"""Confirmatory seeds are seeds no earlier run has seen: a protocol's fresh range, checked against the record.

Every run that informed a protocol change is exploratory (statistics.md); once a protocol is frozen its primary
checks run once more on a declared seed range that no committed run of any protocol has used (tuning, test,
control or fine-tune tuning seeds alike, read from `results/*/data/runs.csv`), and only those seeds decide the
primary verdicts (analysis/verdict_table.py). A range that overlaps the record is refused in one sentence.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.provenance import read_provenance
from lit_modules.config import files

RESULTS = files.CONF_DIR.parent / "results"
RUNS = Path("data") / "runs.csv"


def committed_seeds(results: Path = RESULTS) -> dict[int, list[str]]:
    """Each seed a committed run used -> the result folders whose runs used it; a folder's own declared
    confirmatory seeds (its provenance's `confirmatory_seeds`) do not count, so a frozen protocol reruns."""
    used: dict[int, list[str]] = {}
    for runs in sorted(results.glob(f"*/{RUNS}")) if results.is_dir() else []:
        folder = runs.parent.parent
        own = set((read_provenance(folder) or {}).get("confirmatory_seeds") or [])
        seeds = pd.read_csv(runs, usecols=lambda c: c == "tags.seed", dtype=str)
        for seed in sorted({int(s) for s in seeds.get("tags.seed", pd.Series(dtype=str)).dropna() if s.isdigit()}):
            if seed not in own:
                used.setdefault(seed, []).append(folder.name)
    return used


def confirmatory_problem(seeds: tuple[int, ...], where: str, results: Path = RESULTS) -> str:
    """One sentence when a confirmatory seed was used by a committed run (else "")."""
    used = committed_seeds(results)
    seen = [s for s in seeds if s in used]
    if not seen:
        return ""
    papers = sorted({p for s in seen for p in used[s]})
    return (f"{where}: checks.confirmatory_seeds must be seeds no committed run has used, but {len(seen)} of them "
            f"({', '.join(map(str, seen[:8]))}{', ...' if len(seen) > 8 else ''}) already ran in "
            f"{', '.join(f'results/{p}' for p in papers)}; declare a fresh range (e.g. from "
            f"{max(used) + 1 if used else 0}).")
