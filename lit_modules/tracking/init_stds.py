"""The measured initial std of every weight matrix: params (`init_std.<name>`) and a table artifact.

They were step-0 metrics once (`init/std/<name>`), and then the run page led with one bar chart per
matrix, before the losses, and parallel coordinates defaulted to one of them. As params they sit in the
run's parameter table (searchable, comparable across runs); `run/init_std.csv` keeps the exact values.
"""

from __future__ import annotations

import csv
from pathlib import Path

PARAM_PREFIX = "init_std."
INIT_STD_TABLE = "init_std.csv"  # under the run's `run/` artifacts
DIGITS = 6  # significant digits in the params; the table holds the full float


def init_std_params(init_stds: dict[str, float]) -> dict[str, str]:
    return {f"{PARAM_PREFIX}{name}": f"{std:.{DIGITS}g}" for name, std in init_stds.items()}


def write_init_std_table(path: Path, init_stds: dict[str, float]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["matrix", "std"])
        writer.writerows([name, repr(float(std))] for name, std in init_stds.items())
