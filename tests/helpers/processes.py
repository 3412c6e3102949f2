"""The process table from /proc: which processes a command started, and which of them still run."""

import time
from pathlib import Path

PROC = Path("/proc")


def process_table() -> dict[int, dict]:
    """pid -> ppid, session, state and start time (which tells a pid reused by the kernel apart)."""
    table = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            table[int(entry.name)] = {"state": fields[0], "ppid": int(fields[1]), "sid": int(fields[3]),
                                      "start": int(fields[19]), "cmd": _cmdline(entry)}
    return table


def _cmdline(entry: Path) -> str:
    try:
        return (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def started_by(root: int, table: dict[int, dict]) -> dict[int, int]:
    """Every live process below `root`, and every process in a session one of them leads: pid -> start."""
    tree, frontier = {}, [root]
    while frontier:
        pid = frontier.pop()
        for child, info in table.items():
            if info["ppid"] == pid and child not in tree:
                tree[child] = info["start"]
                frontier.append(child)
    sessions = {table[pid]["sid"] for pid in tree} | {root}
    tree.update({pid: info["start"] for pid, info in table.items() if info["sid"] in sessions and pid != root})
    return tree


def still_running(processes: dict[int, int], sessions: set[int]) -> dict[int, str]:
    """Those of `processes` still alive, and any live process in one of `sessions` (spawned since)."""
    table = process_table()
    return {pid: info["cmd"][:120] for pid, info in table.items() if info["state"] not in ("Z", "X")
            and (processes.get(pid) == info["start"] or info["sid"] in sessions)}


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what} within {timeout_s:.0f} s")
