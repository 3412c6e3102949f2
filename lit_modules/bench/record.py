"""bench_results/bench.json: the summary of one bench process, and the merge of a second process's rows
into it (`python -m sweeps.bench` adds the sweep rows after `python -m lit_modules.bench`)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from lit_modules.bench.verdict import Ratio, bench_summary


def summary_of(ratios: list[Ratio], derived: dict, rows: list[dict], method: dict, machine: dict) -> dict:
    """bench.json's mapping: every key's median, `noisy`, `details`, the descriptive `rows`, `method`, `machine`."""
    summary = bench_summary(ratios, derived)
    summary["rows"] = rows
    summary["method"] = method
    summary["machine"] = machine
    return summary


def machine_of(load_before: tuple[float, float, float], threads: int, command: str) -> dict:
    return {"load_average_before": load_before, "load_average_after": os.getloadavg(),
            "torch_threads": threads, "cores": os.cpu_count(),
            "evidence_running": Path("/work/EVIDENCE_RUNNING").exists(), "commit": commit(), "command": command}


def merged(existing: dict, added: dict, benches: set[str]) -> dict:
    """`existing` with `added`'s keys, details and rows: rows of `benches` and keys `added` measures are
    replaced (a rerun of one process never leaves its old figures beside the new), everything else kept;
    `added`'s machine is recorded under machine["also"]."""
    keys = set(added["details"])
    out = {k: v for k, v in existing.items() if k not in keys}
    out.update({k: v for k, v in added.items() if k not in ("noisy", "details", "rows", "method", "machine")})
    out["details"] = {**{k: v for k, v in existing.get("details", {}).items() if k not in keys}, **added["details"]}
    out["noisy"] = [k for k in existing.get("noisy", []) if k not in keys] + added["noisy"]
    out["rows"] = [r for r in existing.get("rows", []) if r.get("bench") not in benches] + added["rows"]
    out["method"] = existing.get("method", added["method"])
    machine = dict(existing.get("machine", {}))
    machine["also"] = [m for m in machine.get("also", []) if m.get("command") != added["machine"]["command"]]
    machine["also"].append(added["machine"])
    out["machine"] = machine
    return out


def write(path: str | Path, summary: dict) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(summary, indent=2))


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
