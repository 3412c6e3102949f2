"""Where a results folder came from: code version, command, machine, parallelism, date and wall time.

    record = provenance_record(command="make evidence PAPERS=wisca", wall_time_s=1432.0, workers=2,
                               threads_per_worker=1)
    write_provenance(Path("results/wisca"), record)     # -> results/wisca/provenance.json

The driver that ran the cells knows the command, the wall time and how it split the cores; this module
adds the git state (commit and whether the tree was dirty) and the machine, writes `provenance.json`
and renders it for the report header and the ledger.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from pathlib import Path

PROVENANCE_FILE = "provenance.json"
FIELDS = ("git_commit", "git_dirty", "command", "machine", "workers", "threads_per_worker", "date", "wall_time_s")


def provenance_record(command: str, wall_time_s: float, workers: int, threads_per_worker: int,
                      date: str | None = None) -> dict:
    """The record of one evidence run; `date` defaults to now (UTC, ISO 8601, seconds)."""
    from lit_modules.tracking.repro import git_state  # torch comes with it: only when a record is made

    git = git_state()
    return {
        "git_commit": git["commit"],
        "git_dirty": bool(git["dirty"]),
        "command": command,
        "machine": machine(),
        "workers": int(workers),
        "threads_per_worker": int(threads_per_worker),
        "date": date or dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "wall_time_s": float(wall_time_s),
    }


def machine() -> dict:
    return {"platform": platform.platform(), "cpu": _cpu_model(), "cpu_count": os.cpu_count() or 0,
            "python": platform.python_version()}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def write_provenance(folder: str | Path, record: dict) -> Path:
    missing = [f for f in FIELDS if f not in record]
    if missing:
        raise ValueError(f"The provenance record lacks {', '.join(missing)}.")
    path = Path(folder) / PROVENANCE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def read_provenance(folder: str | Path) -> dict | None:
    path = Path(folder) / PROVENANCE_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def wall_time_text(seconds: float) -> str:
    seconds = float(seconds)
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def describe(record: dict) -> str:
    """One Markdown line: commit (dirty?), date, wall time, command, machine, workers x threads."""
    m = record.get("machine", {})
    dirty = " with uncommitted changes" if record.get("git_dirty") else ""
    return (f"commit `{str(record.get('git_commit', '?'))[:10]}`{dirty}, {record.get('date', '?')}, wall time "
            f"{wall_time_text(record.get('wall_time_s', float('nan')))}, `{record.get('command', '?')}` on "
            f"{m.get('cpu', '?')} ({m.get('cpu_count', '?')} cores, {m.get('platform', '?')}), "
            f"{record.get('workers', '?')} worker(s) x {record.get('threads_per_worker', '?')} thread(s)")
