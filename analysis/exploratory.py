"""Whether a protocol's primary verdicts are evidence yet, or exploratory: the gates the shipped protocols pass.

    verdicts = gated(verdicts_table(ab, claim), ab, provenance)   # adds the `exploratory` column
    reasons = ledger_gate(verdicts)                                # [] -> the protocol enters RESULTS.md

A primary row is *exploratory* (its `exploratory` column says why, and the report and the console say it too):
- below its regime: its scale is not matched (fewer than 20 tokens per parameter, or the paper's own TPP);
- a tuned rate at its grid's edge: the arm's (or its reference's) rate, chosen on tuning seeds, is the lowest or
  highest rate of its grid, so the optimum may lie outside it and the pair may compare an untuned side;
- underpowered: fewer seeds than 80% power against the claim's own effect needs (`seeds_needed`).
The first two keep a protocol out of RESULTS.md (`ledger_gate`); every shipped protocol passes them. The third
is said in the row but gates nothing: most published effects are smaller than a CPU ladder's seeds resolve,
and a null result at stated power is a result.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.ablation import Ablation
from analysis.claims import split_arm
from analysis.finetune_lr_tuning import FINETUNE_RATE_KEY, tuning_runs
from analysis.lr_tuning import declared_tunings, tuning_table
from analysis.scale import MATCHED_TPP, number
from analysis.verdict import PRIMARY

EXPLORATORY = "exploratory"
BELOW_REGIME, EDGE_RATE = "below its regime", "tuned rate at its grid's edge"
GATES = (BELOW_REGIME, EDGE_RATE)


def edge_rates(ab: Ablation, provenance: dict | None) -> dict[str, str]:
    """Per tuned arm whose chosen rate is its grid's lowest or highest: a sentence saying so."""
    edges = {}
    for tuning in declared_tunings(provenance):
        cells = tuning_runs(ab.runs, ab.finetunes) if tuning.key == FINETUNE_RATE_KEY else ab.runs
        table = tuning_table(tuning, cells)
        for arm, rows in table.groupby("arm", sort=False):
            chosen = rows.loc[rows["chosen"].astype(bool), "rate"]
            grid = sorted(rows["rate"])
            if len(chosen) and len(grid) > 1 and chosen.iloc[0] in (grid[0], grid[-1]):
                side = "lowest" if chosen.iloc[0] == grid[0] else "highest"
                edges[arm] = (f"{EDGE_RATE}: `{arm}` chose {number(chosen.iloc[0])}, the {side} of "
                              f"{', '.join(number(r) for r in grid)} ({tuning.key})")
    return edges


def _reasons(row: pd.Series, edges: dict[str, str]) -> list[str]:
    if row["role"] != PRIMARY:
        return []
    reasons = []
    if not bool(row["matched"]):
        needed = row["paper_tpp"] if math.isfinite(row["paper_tpp"]) and row["paper_tpp"] < MATCHED_TPP else MATCHED_TPP
        reasons.append(f"{BELOW_REGIME}: {number(row['tpp'])} TPP where the claim is judged at >= {number(needed)}")
    for arm in (row["arm"], row["reference"]):
        tuned = split_arm(arm)[0] if str(row["variant"]) == "tuned" else arm
        if tuned in edges:
            reasons.append(edges[tuned])
    needed = row["seeds_needed"]
    if math.isfinite(needed) and row["n"] < needed:
        reasons.append(f"underpowered: {int(row['n'])} seeds where 80% power against the claim's effect needs "
                       f"{int(needed) if math.isfinite(needed) else 'more than 1000'}")
    return reasons


def gated(verdicts: pd.DataFrame, ab: Ablation, provenance: dict | None) -> pd.DataFrame:
    """The verdict table with its `exploratory` column (empty where a row is evidence)."""
    if verdicts.empty:
        return verdicts
    edges = edge_rates(ab, provenance)
    return verdicts.assign(**{EXPLORATORY: ["; ".join(_reasons(r, edges)) for _, r in verdicts.iterrows()]})


def ledger_gate(verdicts: pd.DataFrame) -> list[str]:
    """Why a protocol stays out of RESULTS.md: each primary row's regime or edge-rate reason (none: it enters)."""
    if verdicts.empty or EXPLORATORY not in verdicts:
        return []
    found = []
    for _, row in verdicts[verdicts["role"] == PRIMARY].iterrows():
        for reason in str(row[EXPLORATORY]).split("; "):
            if reason.startswith(GATES):
                found.append(f"`{row['arm']}` on `{row['metric']}`: {reason}")
    return list(dict.fromkeys(found))
