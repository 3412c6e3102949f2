"""Thin the curves of results folders exported before the export thinned them (analysis.decimate).

    python -m analysis.thin_results results/wisca results/mols ...

Rewrites only the curves of `<folder>/data/`, read and written as the export reads and writes them, through
the same function the export calls: an older export's plain `curves.csv` becomes `curves.csv.gz`
(analysis.results_data); every other file stays as it is. Thinning is idempotent, so a folder already thinned
is left byte for byte. Regenerate the reports afterwards (`make report FROM=<folder>`).
"""

from __future__ import annotations

import sys
from pathlib import Path

from analysis.decimate import decimate_curves
from analysis.results_data import CURVES_FILE, DATA_DIR, _write_csv, curves_path, read_curves


def thin_folder(folder: str | Path) -> tuple[int, int]:
    """Thin the curves of `<folder>/data/` in place; returns their rows before and after."""
    data = Path(folder) / DATA_DIR
    source = curves_path(data)
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing: {folder} is not an exported results folder.")
    curves = read_curves(data)
    thin = decimate_curves(curves)
    staging = data / f".staging.{CURVES_FILE}"  # same suffix: written as the export writes it
    _write_csv(thin, staging)
    staging.replace(data / CURVES_FILE)
    if source.name != CURVES_FILE:
        source.unlink()
    return len(curves), len(thin)


def main(argv: list[str] | None = None) -> int:
    folders = sys.argv[1:] if argv is None else argv
    if not folders:
        print("error: name the results folders to thin, e.g. results/wisca", file=sys.stderr)
        return 2
    for folder in folders:
        try:
            before, after = thin_folder(folder)
        except FileNotFoundError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"{folder}: curves {before} -> {after} rows, in {DATA_DIR}/{CURVES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
