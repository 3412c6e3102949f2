"""An ablation's exported measurements: one folder format, its writer and its reader.

    write_results_data(ab, Path("results/wisca"))      # -> results/wisca/data/...
    ab = read_results_data(Path("results/wisca"))      # the same Ablation, with no MLflow store

Layout of `<folder>/data/`:

    parent.json         the parent run: id, status, name, the tags and params a report reads, source store
    runs.csv            one row per child run (FINISHED or not): run_id, run_name, status, start_time,
                        end_time, params.* / tags.* a report reads (budget, model, regime, seed, arm,
                        config hash, git commit, thread count, ...), final metrics.*, and
                        derived.seconds_per_token (from the run's throughput logs), then arm, seed
    curves.csv.gz       long format: run_id, key, step, tokens_seen, value (the keys and prefixes of
                        analysis.ablation.CURVE_KEYS / CURVE_PREFIXES, throughput left out), each
                        (run, key) thinned by the export (`exported`, analysis.decimate); gzip, as
                        its run ids and keys repeat on every row (a sixth of the bytes). An export
                        written before holds a plain `curves.csv`, read as it is.
    finetune_runs.csv   fine-tune runs started from the children, same columns as runs.csv (maybe none)
    token_gaps.csv      per arm, the token-gap table by difficulty decile on one seed (maybe none)
    sv_hist.csv         per arm, which run's `sv_hist` artifact is kept (if any) ...
    sv_hist/<arm>.png   ... and the PNG itself (the diagnostic writes no numbers)

Exactness: floats are written with Python's shortest round-trip repr and read with
`float_precision="round_trip"`; every column has a fixed dtype per kind (analysis.ablation.typed_runs,
typed_tables.CURVE_DTYPES); a missing value is written as NA_MARK, so an empty string stays an empty
string. The folder is written next to its final place and moved there whole: a failed export leaves the
previous one untouched.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd

from analysis.ablation import Ablation, ParentRecord, SvHist, assemble, run_column_dtype, typed_runs
from analysis.decimate import decimate_curves
from analysis.typed_tables import CURVE_DTYPES, empty_token_gaps, typed_curves

DATA_DIR = "data"
PARENT_FILE = "parent.json"
RUNS_FILE = "runs.csv"
CURVES_FILE = "curves.csv.gz"
PLAIN_CURVES_FILE = "curves.csv"  # older exports' curves, uncompressed
FINETUNES_FILE = "finetune_runs.csv"
TOKEN_GAPS_FILE = "token_gaps.csv"
SV_HIST_FILE = "sv_hist.csv"
SV_HIST_DIR = "sv_hist"
NA_MARK = r"\N"


class ResultsDataError(ValueError):
    """A results folder that cannot be read (missing or malformed files)."""


def exported(ab: Ablation) -> Ablation:
    """`ab` as an export keeps it: every curve thinned to the points a report reads and a figure shows."""
    return replace(ab, curves=decimate_curves(ab.curves))


def write_results_data(ab: Ablation, folder: str | Path) -> Path:
    """Write `ab` to `<folder>/data/`, replacing an older export whole; returns the data folder. Its curves
    are written thinned (`exported`; thinning twice changes nothing)."""
    if ab.parent is None:
        raise ValueError("An ablation without its parent run record cannot be exported.")
    folder = Path(folder)
    target = folder / DATA_DIR
    staging = folder / f".{DATA_DIR}.{os.getpid()}.tmp"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        _write_json(staging / PARENT_FILE, {
            "run_id": ab.parent.run_id, "status": ab.parent.status, "run_name": ab.parent.run_name,
            "tags": ab.parent.tags, "params": ab.parent.params, "source": ab.parent.source,
        })
        _write_csv(ab.runs, staging / RUNS_FILE)
        _write_csv(decimate_curves(ab.curves), staging / CURVES_FILE)
        _write_csv(ab.finetunes, staging / FINETUNES_FILE)
        _write_csv(ab.token_gaps, staging / TOKEN_GAPS_FILE)
        if ab.sv_hists:
            (staging / SV_HIST_DIR).mkdir()
            rows = []
            for h in ab.sv_hists:
                name = f"{safe_name(h.arm)}.png"
                (staging / SV_HIST_DIR / name).write_bytes(h.png)
                rows.append({"arm": h.arm, "seed": h.seed, "artifact": h.artifact, "file": name})
            _write_csv(pd.DataFrame(rows), staging / SV_HIST_FILE)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def read_results_data(folder: str | Path) -> Ablation:
    """The Ablation exported to `<folder>/data/` (or `folder` itself when it is the data folder)."""
    folder = Path(folder)
    data = folder if (folder / PARENT_FILE).is_file() else folder / DATA_DIR
    for required in (PARENT_FILE, RUNS_FILE, CURVES_FILE, FINETUNES_FILE, TOKEN_GAPS_FILE):
        if not (data / required).is_file() and not (required == CURVES_FILE and (data / PLAIN_CURVES_FILE).is_file()):
            raise ResultsDataError(f"{data / required} is missing: {folder} is not an exported results folder "
                                   "(analysis.report export writes one).")
    try:
        meta = json.loads((data / PARENT_FILE).read_text())
        parent = ParentRecord(meta["run_id"], meta["status"], meta["run_name"], dict(meta["tags"]),
                              dict(meta["params"]), meta["source"])
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ResultsDataError(f"{data / PARENT_FILE} is not a parent record ({err}).") from err
    runs = _read_runs(data / RUNS_FILE)
    derived = [c for c in ("arm", "seed") if c in runs]  # assemble derives them again from the tags
    runs = runs.drop(columns=derived)
    curves = read_curves(data)
    finetunes = _read_runs(data / FINETUNES_FILE)
    return assemble(parent, runs, curves, finetunes, read_token_gaps(data), read_sv_hists(data))


def read_token_gaps(data: Path) -> pd.DataFrame:
    """The token-gap table of a data folder (its columns and dtypes, empty where it has none)."""
    if not (data / TOKEN_GAPS_FILE).is_file():
        return empty_token_gaps()
    return _read_csv(data / TOKEN_GAPS_FILE, empty_token_gaps().dtypes.astype(str).to_dict())


def read_sv_hists(data: Path) -> list[SvHist]:
    """The singular-value histograms a data folder keeps (none where it has no sv_hist.csv)."""
    if not (data / SV_HIST_FILE).is_file():
        return []
    rows = _read_csv(data / SV_HIST_FILE, {"arm": "str", "seed": "str", "artifact": "str", "file": "str"})
    return [SvHist(row["arm"], row["seed"], row["artifact"], (data / SV_HIST_DIR / row["file"]).read_bytes())
            for _, row in rows.iterrows()]


def curves_path(data: Path) -> Path:
    """The curves file of a data folder: the gzip one, else an older export's plain CSV."""
    return data / CURVES_FILE if (data / CURVES_FILE).is_file() or not (data / PLAIN_CURVES_FILE).is_file() \
        else data / PLAIN_CURVES_FILE


def read_curves(data: Path) -> pd.DataFrame:
    return typed_curves(_read_csv(curves_path(data), CURVE_DTYPES))


def _read_runs(path: Path) -> pd.DataFrame:
    columns = pd.read_csv(path, nrows=0).columns
    return typed_runs(_read_csv(path, {c: run_column_dtype(c) for c in columns}))


def _read_csv(path: Path, dtypes: dict[str, str]) -> pd.DataFrame:
    columns = list(pd.read_csv(path, nrows=0).columns)
    dates = [c for c in columns if dtypes.get(c, "").startswith("datetime")]
    read_as = {c: ("str" if c in dates else dtypes.get(c, "str")) for c in columns}
    frame = pd.read_csv(path, dtype=read_as, na_values=[NA_MARK], keep_default_na=False,
                        float_precision="round_trip")
    for c in dates:
        frame[c] = pd.to_datetime(frame[c], format="ISO8601").astype(dtypes[c])
    return frame


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    texts = frame.select_dtypes(include=["str", "object"])
    if texts.isin([NA_MARK]).any().any():
        raise ValueError(f"A text value equals the missing-value mark {NA_MARK!r}; it cannot be exported.")
    # mtime 0: the same frame gives the same bytes (gzip records the time it was written otherwise).
    compression = {"method": "gzip", "mtime": 0} if path.suffix == ".gz" else None
    frame.to_csv(path, index=False, na_rep=NA_MARK, date_format="%Y-%m-%dT%H:%M:%S.%f", compression=compression)


def _write_json(path: Path, payload: dict) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def safe_name(name: str) -> str:
    """A file-name-safe form of an arm or preset name."""
    return "".join(ch if ch.isalnum() or ch in "-_.@" else "_" for ch in str(name)) or "unnamed"
