"""MLflow runs -> tidy pandas frames, with a local cache of metric histories.

    store = RunStore(runs_dir="runs")
    parent = store.resolve("smoke")                   # ablation name, sweep study or run id
    runs = store.runs_frame(store.children(parent.info.run_id))
    curves = store.curves(runs, keys=["val/loss"], prefixes=["diag/gmcn/"])

`runs_frame`: one row per run; columns `run_id, run_name, experiment_id, status, start_time, end_time,
parent_run_id`, then `params.<key>`, `tags.<key>` and `metrics.<key>` (the final = latest logged value),
the same prefixes as `mlflow.search_runs`, so a tag and a param of the same name never collide.

`curves`: long format, one row per (run, metric, step): `run_id, key, step, tokens_seen, value`.
Step convention of the training code: a value at step k was measured after optimizer step k (0-based),
so tokens_seen = (k + 1) x `budget.tokens_per_step`.

Cache: metric histories are what cost MLflow round trips (one call per run and metric), so they are
kept under `<runs_dir>/analysis_cache/<run_id>.pkl`, stamped with the run's status and end time. A
history is reused only when the run has ended (FINISHED/FAILED/KILLED), its end time is unchanged and
the history's last value still equals the run's latest value of that metric (which the run listing
returns for free): a finished run is never re-queried, a running or resumed one always is, and a value
logged into a finished run later (e.g. an evaluation) is noticed.
"""

from __future__ import annotations

import math
import os
import pickle
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

import pandas as pd
from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from lit_modules.runs import tags
from lit_modules.runs.search import children_filter, find_parent
from lit_modules.tracking.store import tracking_uri
from lit_modules.runs.uri_masking import mask_password

ENDED = ("FINISHED", "FAILED", "KILLED")
CACHE_DIR_NAME = "analysis_cache"
CACHE_VERSION = 1
RUN_ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")
HISTORY_COLUMNS = ["step", "value", "timestamp"]
CURVE_COLUMNS = ["run_id", "key", "step", "tokens_seen", "value"]


class RunNotFound(LookupError):
    """No parent run matches the name the user gave."""


class RunStore:
    """Reads runs from one MLflow tracking store and caches the metric histories of ended runs."""

    def __init__(
        self,
        runs_dir: str | Path = "runs",
        tracking: str | None = None,
        client: MlflowClient | None = None,
        cache: bool = True,
    ):
        self.runs_dir = Path(runs_dir)
        self.client = client if client is not None else MlflowClient(tracking_uri(tracking, str(runs_dir)))
        self.cache_dir = self.runs_dir.resolve() / CACHE_DIR_NAME if cache else None
        self._memory: dict[str, dict] = {}
        self._known: dict[str, Run] = {}  # runs listed by this store, so curves() need not fetch them again

    # ------------------------------------------------------------------ finding runs

    def experiment_ids(self) -> list[str]:
        return [e.experiment_id for e in self.client.search_experiments()]

    def search(self, filter_string: str, order_by: list[str] | None = None) -> list[Run]:
        """Every run of every experiment matching the filter (all pages)."""
        ids = self.experiment_ids()
        if not ids:
            return []
        runs: list[Run] = []
        token = None
        while True:
            page = self.client.search_runs(
                ids, filter_string=filter_string, max_results=1000, order_by=order_by, page_token=token
            )
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def run(self, run_id: str) -> Run:
        return self.client.get_run(run_id)

    def resolve(self, name: str) -> Run:
        """The parent run a user means: a run id, else the newest ablation parent `ablation.name=<name>`,
        else the newest sweep parent `sweep.study=<name>`."""
        if RUN_ID_PATTERN.match(name):
            try:
                return self.run(name)
            except Exception:  # noqa: BLE001 - not a run id after all; try it as a name
                pass
        found = find_parent(self.client, name)
        if found is not None:
            return found
        raise RunNotFound(
            f"No run id, ablation (tag ablation.name) or sweep (tag sweep.study) named '{name}' in "
            f"{mask_password(self.client.tracking_uri)}."
        )

    def experiment_runs(self, experiment: str) -> list[Run]:
        """Every run of the MLflow experiment with this name (oldest first)."""
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            raise RunNotFound(f"No MLflow experiment named '{experiment}' in {mask_password(self.client.tracking_uri)}.")
        runs: list[Run] = []
        token = None
        while True:
            page = self.client.search_runs([found.experiment_id], max_results=1000, page_token=token,
                                           order_by=["attributes.start_time ASC"])
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def children(self, parent_run_id: str) -> list[Run]:
        return self.search(children_filter(parent_run_id), order_by=["attributes.start_time ASC"])

    def finetunes_of(self, base_run_ids: Iterable[str]) -> list[Run]:
        """Fine-tune runs (tag `finetune.base_run_id`) started from any of the given runs."""
        wanted = set(base_run_ids)
        if not wanted:
            return []
        found = self.search(f"tags.`{tags.FINETUNE_BASE}` LIKE '%'")
        return [r for r in found if r.data.tags.get(tags.FINETUNE_BASE) in wanted]

    # ------------------------------------------------------------------ frames

    def runs_frame(self, runs: Iterable[Run]) -> pd.DataFrame:
        runs = list(runs)
        self._known.update({r.info.run_id: r for r in runs})
        return runs_frame(runs)

    def history(self, run: Run, key: str) -> pd.DataFrame:
        """(step, value, timestamp) of one metric, sorted by step; from the cache when it is still valid."""
        run_id = run.info.run_id
        entry = self._entry(run)
        latest = run.data.metrics.get(key)
        cached = entry["histories"].get(key)
        if cached is not None and _still_valid(entry, run, cached, latest):
            return cached
        rows = [(m.step, m.value, m.timestamp) for m in self.client.get_metric_history(run_id, key)]
        frame = pd.DataFrame(rows, columns=HISTORY_COLUMNS).sort_values(["step", "timestamp"], kind="stable")
        frame = frame.reset_index(drop=True)
        entry["histories"][key] = frame
        if run.info.status in ENDED:
            self._save(run_id, entry)
        return frame

    def curves(
        self,
        runs: pd.DataFrame,
        keys: Iterable[str] = (),
        prefixes: Iterable[str] = (),
    ) -> pd.DataFrame:
        """Long-format histories of the named metrics and of every metric starting with a prefix.

        `runs` is a `runs_frame`; a run this store did not list itself is fetched once more."""
        keys, prefixes = list(keys), tuple(prefixes)
        pieces = []
        for run_id in runs["run_id"]:
            run = self._known.get(run_id) or self.run(run_id)
            wanted = [k for k in run.data.metrics if k in keys or (prefixes and k.startswith(prefixes))]
            per_step = _tokens_per_step(run)
            for key in sorted(wanted):
                hist = self.history(run, key)
                if hist.empty:
                    continue
                piece = pd.DataFrame({
                    "run_id": run_id,
                    "key": key,
                    "step": hist["step"].to_numpy(),
                    "tokens_seen": (hist["step"].to_numpy() + 1) * per_step,
                    "value": hist["value"].to_numpy(),
                })
                pieces.append(piece)
        if not pieces:
            return pd.DataFrame(columns=CURVE_COLUMNS)
        return pd.concat(pieces, ignore_index=True)

    def download_artifact(self, run_id: str, artifact_path: str) -> Path:
        """An artifact file, downloaded once into the cache folder (artifacts are written once)."""
        root = (self.cache_dir or Path(self.runs_dir).resolve() / CACHE_DIR_NAME) / "artifacts" / run_id
        local = root / artifact_path
        if not local.is_file():
            local.parent.mkdir(parents=True, exist_ok=True)
            # MLflow puts a downloaded file under dst by its base name, so aim dst at its folder.
            with _no_progress_bar():
                local = Path(self.client.download_artifacts(run_id, artifact_path, str(local.parent)))
        return local

    def list_files(self, run_id: str, path: str | None = None, depth: int | None = None) -> list[str]:
        """Artifact files under `path`, `depth` folders deep (None: all); empty when the store cannot be read."""
        files: list[str] = []
        try:
            entries = self.client.list_artifacts(run_id, path)
        except Exception:  # noqa: BLE001 - an unreachable artifact store: nothing to show
            return files
        for entry in entries:
            if not entry.is_dir:
                files.append(entry.path)
            elif depth is None or depth > 0:
                files += self.list_files(run_id, entry.path, None if depth is None else depth - 1)
        return files

    def find_artifacts(self, run_id: str, file_name: str, path: str | None = None, depth: int = 3) -> list[str]:
        """Artifact paths (relative to the run's root) whose file name is `file_name`, searched `depth` deep."""
        return [p for p in self.list_files(run_id, path, depth) if p.rsplit("/", 1)[-1] == file_name]

    # ------------------------------------------------------------------ cache internals

    def _entry(self, run: Run) -> dict:
        run_id = run.info.run_id
        stamp = _stamp(run)
        entry = self._memory.get(run_id)
        if entry is None and self.cache_dir is not None:
            entry = _load(self.cache_dir / f"{run_id}.pkl")
        if entry is None or entry.get("stamp") != stamp or entry.get("version") != CACHE_VERSION:
            entry = {"version": CACHE_VERSION, "stamp": stamp, "histories": {}}
        self._memory[run_id] = entry
        return entry

    def _save(self, run_id: str, entry: dict) -> None:
        if self.cache_dir is None:
            return
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_dir / f".{run_id}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(entry, f)
        tmp.replace(self.cache_dir / f"{run_id}.pkl")  # atomic: a reader never sees half a file


@contextmanager
def _no_progress_bar() -> Iterator[None]:
    """MLflow draws a progress bar per downloaded file; a report downloading dozens should stay quiet."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    previous = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = previous


def load_runs(
    name: str | None = None,
    runs_dir: str | Path = "runs",
    experiment: str | None = None,
    store: RunStore | None = None,
) -> pd.DataFrame:
    """The runs of an ablation or sweep (`name`: preset, study or parent run id; its child runs) or of
    a whole MLflow experiment (`experiment`), as a `runs_frame`."""
    store = store or RunStore(runs_dir)
    if experiment is not None:
        return store.runs_frame(store.experiment_runs(experiment))
    if name is None:
        raise ValueError("Name an ablation, a sweep or a parent run id, or an MLflow experiment.")
    return store.runs_frame(store.children(store.resolve(name).info.run_id))


def load_curves(
    runs: pd.DataFrame,
    keys: Iterable[str] = ("val/loss",),
    prefixes: Iterable[str] = (),
    runs_dir: str | Path = "runs",
    store: RunStore | None = None,
) -> pd.DataFrame:
    """Metric histories of the runs of a `runs_frame` (see `RunStore.curves`), through the cache."""
    return (store or RunStore(runs_dir)).curves(runs, keys=keys, prefixes=prefixes)


def _stamp(run: Run) -> tuple[str, int | None]:
    return run.info.status, run.info.end_time


def _still_valid(entry: dict, run: Run, cached: pd.DataFrame, latest: float | None) -> bool:
    if run.info.status not in ENDED or entry.get("stamp") != _stamp(run) or cached.empty:
        return False
    last = float(cached["value"].iloc[-1])
    return latest is not None and (last == latest or (math.isnan(last) and math.isnan(latest)))


def _load(path: Path) -> dict | None:
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None  # absent or unreadable: query MLflow again


def _tokens_per_step(run: Run) -> float:
    value = run.data.params.get("budget.tokens_per_step")
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def runs_frame(runs: Iterable[Run]) -> pd.DataFrame:
    """One row per run: identity columns, then params.*, tags.*, metrics.* (final values)."""
    runs = list(runs)
    rows = []
    for run in runs:
        row = {
            "run_id": run.info.run_id,
            "run_name": run.info.run_name,
            "experiment_id": run.info.experiment_id,
            "status": run.info.status,
            "start_time": pd.to_datetime(run.info.start_time, unit="ms") if run.info.start_time else pd.NaT,
            "end_time": pd.to_datetime(run.info.end_time, unit="ms") if run.info.end_time else pd.NaT,
            "parent_run_id": run.data.tags.get(tags.PARENT),
        }
        row.update({f"params.{k}": v for k, v in run.data.params.items()})
        row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
        row.update({f"metrics.{k}": float(v) for k, v in run.data.metrics.items()})
        rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        frame = pd.DataFrame(columns=["run_id", "run_name", "experiment_id", "status", "start_time",
                                      "end_time", "parent_run_id"])
    return frame


def numeric(series: pd.Series) -> pd.Series:
    """Params and tags are strings in MLflow; this turns a column into floats (NaN where not a number)."""
    return pd.to_numeric(series, errors="coerce")


def metric_columns(frame: pd.DataFrame, prefix: str) -> list[str]:
    """`metrics.<prefix>...` columns present in a runs frame, sorted."""
    return sorted(c for c in frame.columns if c.startswith(f"metrics.{prefix}"))


def final_of(curves: pd.DataFrame, key: str) -> pd.Series:
    """The last value (largest step) of one metric per run, from a curves frame."""
    rows = curves[curves["key"] == key]
    if rows.empty:
        return pd.Series(dtype=float)
    return rows.sort_values("step").groupby("run_id")["value"].last()
