"""How a results folder stands against its protocol: whether it ran under the protocol file as the file is now (or
under an earlier revision), and which declared stages have not run yet.

    protocol_sha256(path)                                 # the hash the driver records (provenance.json)
    superseded_line("evidence/mols", provenance)          # "" when current, else one line for the report/ledger
    pending_line(provenance, ab.runs)                     # "" when every declared test cell has run

The driver records the sha256 of `conf/evidence/<paper>.yaml`'s bytes with each export. A folder whose record has
none, or another, holds cells and checks of an earlier revision: its families are read from its own record
(analysis.families `families_for`), and its report and RESULTS.md section say that a rerun is pending.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

from analysis.families import PROTOCOL_PREFIX, protocol_path

PROTOCOL_SHA256 = "protocol_sha256"


def protocol_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def is_superseded(ablation_name: str, provenance: dict | None) -> bool:
    """An evidence folder whose provenance does not record the current protocol file's hash (or whose file is
    gone). No record at all (a report straight from a store) and an ablation that is not an evidence protocol
    have no revision to be behind."""
    if provenance is None or not ablation_name.startswith(PROTOCOL_PREFIX):
        return False
    path = protocol_path(ablation_name)
    recorded = provenance.get(PROTOCOL_SHA256)
    return path is None or not recorded or recorded != protocol_sha256(path)


def superseded_line(ablation_name: str, provenance: dict | None) -> str:
    """One line for a folder from an earlier revision of its protocol; "" for a current one."""
    if not is_superseded(ablation_name, provenance):
        return ""
    where = f"conf/evidence/{ablation_name[len(PROTOCOL_PREFIX):]}.yaml"
    return (f"From an earlier revision of `{where}` (its cells and checks as recorded in `provenance.json`); "
            "the rerun on the current protocol is pending.")


def pending_stages(provenance: dict | None, runs: pd.DataFrame) -> dict[str, tuple[int, int]]:
    """Stage -> (test cells that ended, test cells declared), for each stage the provenance's `declared_seeds`
    names with a test cell no run of which ended (FINISHED, or FAILED: a diverged cell will not finish on another
    call either) in `runs` (arm, seed, status); {} when none is pending. A cell two blocks declare counts once."""
    ended = runs[runs["status"].isin(["FINISHED", "FAILED"])] if len(runs) else runs
    done = set(zip(ended["arm"].astype(str), ended["seed"].astype(str))) if len(ended) else set()
    cells: dict[str, set[tuple[str, str]]] = {}
    for block in (provenance or {}).get("declared_seeds") or []:
        stage = str(block.get("stage", "headline"))
        cells.setdefault(stage, set()).update((str(a), str(s)) for a in block.get("arms", []) for s in block.get("seeds", []))
    return {stage: (len(c & done), len(c)) for stage, c in cells.items() if not c <= done}


def pending_line(provenance: dict | None, runs: pd.DataFrame) -> str:
    """One line naming the declared stages with test cells that have not run yet ("" when none): the folder is a
    partial export, and what it lacks (a rung, a control) is still to come."""
    pending = pending_stages(provenance, runs)
    if not pending:
        return ""
    parts = [f"`{stage}` ({n} of {total} test cells run)" for stage, (n, total) in pending.items()]
    one = len(parts) == 1
    return (f"Partial export: the protocol's {'stage' if one else 'stages'} {', '.join(parts)} "
            f"{'has' if one else 'have'} not finished yet.")
