"""Whether a results folder ran under its protocol file as the file is now, or under an earlier revision.

    protocol_sha256(path)                                 # the hash the driver records (provenance.json)
    superseded_line("evidence/mols", provenance)          # "" when current, else one line for the report/ledger

The driver records the sha256 of `conf/evidence/<paper>.yaml`'s bytes with each export. A folder whose record has
none, or another, holds cells and checks of an earlier revision: its families are read from its own record
(analysis.families `families_for`), and its report and RESULTS.md section say that a rerun is pending.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

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
