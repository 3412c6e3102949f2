"""A store seeded from a paper's committed export, so that its evidence goes on where the last export stopped.

    restored = restore_export(spec.preset, runs_dir="runs", folder=Path("results/wisca"),
                              checks_sha256=declared["checks_sha256"])

The store (`runs/`) lives on one machine and the export (`results/<paper>/data/`) is committed, so a protocol
that takes several sessions, or a fresh clone, finds its finished cells again only in the export. Each exported
run is written back as a run of the preset's grid, with its status, times, the params and tags the export kept,
its final metrics and its exported curves: the tuning loop reads its losses, the ablation skips its cell (by its
config hash), and the next export writes it as it was, under the id it was exported with (tag RESTORED_FROM; the
store gives it a new one), so a protocol's committed rows stay as they were from session to session.
Only an export of the same declaration (its `checks_sha256`) is restored: another protocol's cells are not this
one's. What the export keeps that no run holds (the token-gap table, the singular-value histograms: the runs'
artifacts are not exported) goes onto the parent run (KEPT_DIR), where the next export reads it.

A fine-tune starts from its base's checkpoint, which no export holds: the fine-tune stage trains a restored base
that still needs one again first (sweeps/evidence/retrain.py).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from mlflow.entities import Metric, Param, Run
from mlflow.tracking import MlflowClient

from analysis.ablation import SECONDS_PER_TOKEN, Ablation
from analysis.provenance import read_provenance
from analysis.results_data import DATA_DIR, PARENT_FILE, SV_HIST_DIR, SV_HIST_FILE, TOKEN_GAPS_FILE, \
    read_results_data, write_results_data
from analysis.store_ablation import KEPT_DIR
from lit_modules.runs import tags
from lit_modules.runs.search import ABLATION, children_filter, find_parent, parent_filter, parent_tags
from lit_modules.tracking.run_lifecycle import find_or_open_parent
from lit_modules.tracking.store import get_or_create_experiment, open_client, tracking_uri

BATCH = 1000  # MLflow's limit on metrics (and on all entries) in one log_batch
PARAM_BATCH = 100
ENDED = ("FINISHED", "FAILED", "KILLED")


@dataclass(frozen=True)
class Restored:
    runs: int
    finetunes: int
    wall_time_s: float  # what the export's record says its cells took


def restore_export(preset: str, runs_dir: str, folder: str | Path, checks_sha256: str,
                   experiment: str | None = None) -> Restored | None:
    """Write the committed export in `folder` into the store's grid of `preset`: every exported run (and
    fine-tune) the store lacks: none of its runs is it or stands for it, and, for a cell, no FINISHED run there
    has its config hash. None when nothing was restored: no export, one of another declaration, or a store that
    has it all. `experiment`: the MLflow experiment a fresh parent opens in (the preset's `logger.experiment`)."""
    folder = Path(folder)
    record = read_provenance(folder)
    if not (folder / DATA_DIR / PARENT_FILE).is_file() or record is None \
            or record.get("checks_sha256") != checks_sha256:
        return None
    ab = read_results_data(folder)
    client = open_client(tracking_uri(None, runs_dir))
    parent, opened = _parent(client, preset, ab, runs_dir, experiment or preset)
    store_id, done = _known_runs(client, parent)
    todo = ab.runs[[row["run_id"] not in store_id
                    and not (row["status"] == "FINISHED" and row.get(f"tags.{tags.CONFIG_HASH}") in done)
                    for _, row in ab.runs.iterrows()]]
    curves = dict(tuple(ab.curves.groupby("run_id"))) if not ab.curves.empty else {}
    for _, row in todo.iterrows():
        store_id[row["run_id"]] = _restore_run(client, parent, row, curves.get(row["run_id"]),
                                               {tags.PARENT: parent.info.run_id})
    finetunes = 0
    for _, row in ab.finetunes.iterrows():
        base = store_id.get(row.get(f"tags.{tags.FINETUNE_BASE}"))
        if base is not None and row["run_id"] not in store_id:
            store_id[row["run_id"]] = _restore_run(client, parent, row, None, {
                tags.PARENT: base, tags.FINETUNE_BASE: base, tags.FINETUNE_GRID_PARENT: parent.info.run_id})
            finetunes += 1
    if todo.empty and not finetunes:
        if opened:
            client.delete_run(parent.info.run_id)  # nothing to restore into it: leave the store as it was
        return None
    _keep_tables(client, parent.info.run_id, ab)
    if opened and ab.parent.status in ENDED:
        client.set_terminated(parent.info.run_id, status=ab.parent.status)
    return Restored(len(todo), finetunes, float(record.get("wall_time_s") or 0.0))


def _parent(client: MlflowClient, preset: str, ab: Ablation, runs_dir: str, experiment: str) -> tuple[Run, bool]:
    """The store's parent of the grid, else one opened with the exported parent's tags and params (True)."""
    found = find_parent(client, preset, kinds=(ABLATION,))
    if found is not None:
        return found, False
    experiment_id = get_or_create_experiment(client, experiment, runs_dir)
    run_id, _ = find_or_open_parent(client, experiment_id, parent_filter(ABLATION, preset), ab.parent.run_name, {
        **ab.parent.tags, **parent_tags(ABLATION, preset), tags.RESTORED_FROM: ab.parent.run_id}, ab.parent.params)
    return client.get_run(run_id), True


def _known_runs(client: MlflowClient, parent: Run) -> tuple[dict[str, str], set[str]]:
    """(exported or store run id -> the store's run id, for the grid's runs and fine-tunes: a restored run under
    the id it stands for too; the config hashes of the grid's FINISHED cells)."""
    experiment = [parent.info.experiment_id]
    cells = client.search_runs(experiment, filter_string=children_filter(parent.info.run_id), max_results=50_000)
    finetunes = client.search_runs(experiment, max_results=50_000, filter_string=(
        f"tags.`{tags.FINETUNE_GRID_PARENT}` = '{parent.info.run_id}'"))
    store_id = {}
    for run in cells + finetunes:
        store_id[run.info.run_id] = run.info.run_id
        if tags.RESTORED_FROM in run.data.tags:
            store_id[run.data.tags[tags.RESTORED_FROM]] = run.info.run_id
    done = {r.data.tags.get(tags.CONFIG_HASH) for r in cells if r.info.status == "FINISHED"}
    return store_id, done - {None}


def _restore_run(client: MlflowClient, parent: Run, row: pd.Series, curves: pd.DataFrame | None,
                 links: dict[str, str]) -> str:
    """One exported run written into the store as it was exported; returns its new run id."""
    start, end = _ms(row["start_time"]), _ms(row["end_time"])
    run_tags = {c.removeprefix("tags."): str(v) for c, v in row.items() if c.startswith("tags.") and _present(v)}
    run_tags.update(links)
    run_tags[tags.RESTORED_FROM] = str(row["run_id"])
    if _present(row.get(SECONDS_PER_TOKEN)):
        run_tags[tags.RESTORED_SECONDS_PER_TOKEN] = repr(float(row[SECONDS_PER_TOKEN]))
    name = row["run_name"] if _present(row.get("run_name")) else None
    run = client.create_run(parent.info.experiment_id, start_time=start, tags=run_tags, run_name=name)
    run_id = run.info.run_id
    params = [Param(c.removeprefix("params."), str(v)) for c, v in row.items() if c.startswith("params.") and _present(v)]
    for i in range(0, len(params), PARAM_BATCH):
        client.log_batch(run_id, params=params[i:i + PARAM_BATCH])
    for i in range(0, len(metrics := _metrics(row, curves, start or 0)), BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + BATCH])
    if row["status"] in ENDED:  # a run exported while it ran is ended by the next ablation, as a dead one
        client.set_terminated(run_id, status=str(row["status"]), end_time=end)
    return run_id


def _metrics(row: pd.Series, curves: pd.DataFrame | None, start: int) -> list[Metric]:
    """The run's exported curve points in their order, then each final value its curve does not end on, each
    point a millisecond after the one before: the store's latest value of a key is the exported final one,
    and two points at one step stay two, in their order."""
    out: list[Metric] = []
    last: dict[str, tuple[int, float]] = {}
    if curves is not None:
        for key, curve in curves.groupby("key", sort=False):
            out += [Metric(key, float(v), 0, int(s)) for s, v in zip(curve["step"], curve["value"])]
            last[key] = (int(curve["step"].iloc[-1]), float(curve["value"].iloc[-1]))
    for col, value in row.items():
        if not col.startswith("metrics.") or not _present(value):
            continue
        key, value = col.removeprefix("metrics."), float(value)
        step, ends_on = last.get(key, (0, None))
        if ends_on is None or not (ends_on == value or (math.isnan(ends_on) and math.isnan(value))):
            out.append(Metric(key, value, 0, step))
    return [Metric(m.key, m.value, start + i, m.step) for i, m in enumerate(out)]


def _keep_tables(client: MlflowClient, parent_id: str, ab: Ablation) -> None:
    """The export's token-gap table and singular-value histograms onto the parent (KEPT_DIR), in the export's
    own file format, unless it holds them already."""
    if (ab.token_gaps.empty and not ab.sv_hists) or client.list_artifacts(parent_id, KEPT_DIR):
        return
    with tempfile.TemporaryDirectory() as tmp:
        data = write_results_data(ab, tmp)
        client.log_artifact(parent_id, str(data / TOKEN_GAPS_FILE), KEPT_DIR)
        if ab.sv_hists:
            client.log_artifact(parent_id, str(data / SV_HIST_FILE), KEPT_DIR)
            client.log_artifacts(parent_id, str(data / SV_HIST_DIR), f"{KEPT_DIR}/{SV_HIST_DIR}")


def _present(value: object) -> bool:
    """A value the export wrote (not its missing-value mark)."""
    if isinstance(value, str):
        return True
    try:
        return not pd.isna(value)
    except (TypeError, ValueError):
        return True


def _ms(value: object) -> int | None:
    return int(pd.Timestamp(value).value // 1_000_000) if _present(value) else None
