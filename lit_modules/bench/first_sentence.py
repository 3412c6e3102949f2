"""`first_sentence_s_<case>` (issue 27 item 7): wall seconds from starting `python -m lit_modules.train` to
the first line it writes (stdout and stderr together), for a composition refusal (an unknown model), a
validation refusal (a negative learning rate), `--help` and a dry run's first line. Target about 2 s: what
a person waits for before the command says anything. Wall clock over repeats (a process start is what is
measured); the bench reports the median and its interval like every other row.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lit_modules.bench.verdict import Ratio, Target

# case -> the command line's arguments after `python -m lit_modules.train`.
CASES = {
    "composition_refusal": ["model=nonexistent"],
    "validation_refusal": ["optim.lr=-1"],
    "help": ["--help"],
    "dry_run": ["dry_run=true"],
}
TARGET = Target("<=", 2.0)
REPO = Path(__file__).resolve().parents[2]


def first_line_seconds(args: list[str], cwd: Path = REPO) -> tuple[float, str]:
    """(seconds to the first line on stdout or stderr, that line) of one `python -m lit_modules.train`."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    started = time.perf_counter()
    with subprocess.Popen([sys.executable, "-m", "lit_modules.train", *args], cwd=cwd, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as process:
        line = process.stdout.readline()
        seconds = time.perf_counter() - started
        process.stdout.read()  # drain, so the child never blocks on a full pipe
        process.wait()
    return seconds, line.rstrip("\n")


PROCESSES_PER_REPEAT = 3  # a process start is ~0.2-1.2 s: 10 of them gave a +-3-5% interval, 30 a narrower one


def first_sentence_rows(repeats: int, ratios: list[Ratio], rows: list[dict]) -> None:
    """One Ratio per case (`first_sentence_s_<case>`, wall seconds over PROCESSES_PER_REPEAT x `repeats`
    processes, the cases taking turns so a slow spell of the machine falls on all of them) and a row."""
    runs = {case: [] for case in CASES}
    for _ in range(PROCESSES_PER_REPEAT * repeats):
        for case, args in CASES.items():
            runs[case].append(first_line_seconds(args))
    for case, args in CASES.items():
        timed = runs[case]
        ratio = Ratio(f"first_sentence_s_{case}", tuple(s for s, _ in timed), clock="wall", target=TARGET)
        ratios.append(ratio)
        rows.append({"bench": "first_sentence", "variant": case, "clock": "wall", "command":
                     " ".join(["python -m lit_modules.train", *args]), "seconds": [s for s, _ in timed],
                     "first_line": timed[0][1][:200], "median_s": ratio.median, "interval_95": ratio.interval})
