"""An ablation read from the MLflow store into the one representation reports render from (`Ablation`).

    ab = load_ablation(store, store.resolve("smoke"))

Reads the parent run, its child runs (only the columns a report uses: `analysis.ablation.slim_runs`), their
curves, the fine-tune runs started from them, and turns the artifacts a report shows into small tables
here, once: per-token log-probabilities become the token-gap table (`token_gap.token_gap`, deciles), and
each arm's `sv_hist` PNG is kept as bytes. Throughput curves become one number per run (seconds per
token) and are dropped. Nothing later needs the store, so the same object can be written to CSV files
(`analysis.results_data`) and a report made from those files is the same report.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd
from mlflow.entities import Run

from analysis.ablation import (
    CURVE_KEYS,
    CURVE_PREFIXES,
    PERF_KEYS,
    SECONDS_PER_TOKEN,
    Ablation,
    ParentRecord,
    SvHist,
    assemble,
    slim_runs,
)
from analysis.comparisons import reference_of, seconds_per_token
from analysis.claims import Claim, claim_for
from analysis.seeds import seed_key
from analysis.load_runs import RunStore, numeric
from analysis.results_data import SV_HIST_DIR, SV_HIST_FILE, TOKEN_GAPS_FILE, read_sv_hists, read_token_gaps
from analysis.token_gap import load_token_logprobs, token_gap
from analysis.typed_tables import TOKEN_GAP_COLUMNS, empty_token_gaps, typed_curves
from lit_modules.runs import tags
from lit_modules.runs.uri_masking import mask_password

TOKEN_LOGPROBS = "token_logprobs.npz"
PARENT_TAGS = ("ablation.",)
PARENT_PARAMS = ("arms", "seeds", "overrides", "ablation.baseline")
KEPT_DIR = "restored"  # a restored grid's parent: the export's tables that no run holds (sweeps/evidence/restore.py)
def store_name(uri: str) -> str:
    """How a report names the store it read: no password, and a local SQLite file relative to the working
    folder when it lies below it (a committed report names no machine's paths)."""
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///"))
        try:
            return f"sqlite:///{path.resolve().relative_to(Path.cwd().resolve()).as_posix()}"
        except ValueError:
            return uri
    return mask_password(uri)


def load_ablation(store: RunStore, parent: Run) -> Ablation:
    record = parent_record(parent, store_name(store.client.tracking_uri))
    runs = store.runs_frame(store.children(parent.info.run_id))
    finished_ids = _finished_ids(runs)
    curves = store.curves(runs[runs["run_id"].isin(finished_ids)], keys=CURVE_KEYS, prefixes=CURVE_PREFIXES)
    runs = _with_seconds_per_token(runs, curves)
    curves = typed_curves(curves[~curves["key"].isin(PERF_KEYS)])
    finetunes = store.runs_frame(store.finetunes_of(finished_ids))
    runs, curves, finetunes = as_first_exported(runs, curves, finetunes, parent)
    record = replace(record, run_id=parent.data.tags.get(tags.RESTORED_FROM, record.run_id))
    ab = assemble(record, slim_runs(runs), curves, slim_runs(finetunes), empty_token_gaps(), [])
    claim = claim_for(ab.claim_key)
    kept_gaps, kept_hists = kept_tables(store, parent.info.run_id)
    order = {arm: i for i, arm in enumerate(ab.arms)}
    gaps = [g for g in (kept_gaps, token_gaps_of(ab, claim, store, skip=set(kept_gaps["arm"]))) if not g.empty]
    ab.token_gaps = pd.concat(gaps, ignore_index=True).sort_values("arm", key=lambda a: a.map(order), kind="stable") \
        .reset_index(drop=True).astype(empty_token_gaps().dtypes.to_dict()) if gaps else empty_token_gaps()
    hists = kept_hists + sv_hists_of(ab, store, skip={h.arm for h in kept_hists})
    ab.sv_hists = sorted(hists, key=lambda h: order.get(h.arm, len(order)))
    return ab


def as_first_exported(runs: pd.DataFrame, curves: pd.DataFrame, finetunes: pd.DataFrame,
                      parent: Run) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The frames with each run (and the parent) restored from an export (sweeps/evidence/restore.py) under the
    id it was exported with (tag RESTORED_FROM): a protocol resumed over several sessions keeps its committed
    rows as they were."""
    column = f"tags.{tags.RESTORED_FROM}"
    first = {parent.info.run_id: parent.data.tags[tags.RESTORED_FROM]} if tags.RESTORED_FROM in parent.data.tags \
        else {}
    for frame in (runs, finetunes):
        if column in frame:
            rows = frame[frame[column].notna()]
            first.update(zip(rows["run_id"], rows[column]))
    if not first:
        return runs, curves, finetunes

    def renamed(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
        return frame.assign(**{c: frame[c].map(lambda i: first.get(i, i)) for c in columns if c in frame})

    return (renamed(runs, ("run_id",)), renamed(curves, ("run_id",)),
            renamed(finetunes, ("run_id", f"tags.{tags.FINETUNE_BASE}", f"tags.{tags.FINETUNE_GRID_PARENT}",
                                "parent_run_id")))


def kept_tables(store: RunStore, parent_run_id: str) -> tuple[pd.DataFrame, list[SvHist]]:
    """The token-gap rows and histograms a grid restored from an export keeps on its parent (KEPT_DIR): its
    restored runs have no artifacts to compute them from again, so an arm found there is taken as it was."""
    names = {p.rsplit("/", 1)[-1] for p in store.list_files(parent_run_id, KEPT_DIR)}
    if TOKEN_GAPS_FILE not in names:
        return empty_token_gaps(), []
    data = store.download_artifact(parent_run_id, f"{KEPT_DIR}/{TOKEN_GAPS_FILE}").parent
    if SV_HIST_FILE in names:
        store.download_artifact(parent_run_id, f"{KEPT_DIR}/{SV_HIST_FILE}")
        for path in store.list_files(parent_run_id, f"{KEPT_DIR}/{SV_HIST_DIR}"):
            store.download_artifact(parent_run_id, path)
    return read_token_gaps(data), read_sv_hists(data)


def parent_record(parent: Run, source: str) -> ParentRecord:
    tags = {k: v for k, v in sorted(parent.data.tags.items()) if k.startswith(PARENT_TAGS)}
    params = {k: v for k, v in sorted(parent.data.params.items()) if k in PARENT_PARAMS}
    return ParentRecord(parent.info.run_id, parent.info.status, parent.info.run_name or "", tags, params, source)


def _finished_ids(runs: pd.DataFrame) -> list[str]:
    return list(runs.loc[runs["status"] == "FINISHED", "run_id"]) if not runs.empty else []


def _with_seconds_per_token(runs: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    per_step = numeric(runs["params.budget.tokens_per_step"]) if "params.budget.tokens_per_step" in runs \
        else pd.Series(float("nan"), index=runs.index)
    by_run = dict(tuple(curves.groupby("run_id"))) if not curves.empty else {}
    values = pd.Series([seconds_per_token(by_run[r], float(t)) if r in by_run else float("nan")
                        for r, t in zip(runs["run_id"], per_step)], index=runs.index, dtype="float64")
    # A run restored from an export has no throughput logs: the export's number for it travels as a tag.
    restored = f"tags.{tags.RESTORED_SECONDS_PER_TOKEN}"
    if restored in runs:
        values = values.fillna(numeric(runs[restored]))
    return runs.assign(**{SECONDS_PER_TOKEN: values})


def token_gaps_of(ab: Ablation, claim: Claim, store: RunStore, skip: set[str] = frozenset()) -> pd.DataFrame:
    """Per arm (but those in `skip`), on the first seed where both it and its reference saved per-token
    log-probabilities: the token-gap table by difficulty decile (or a note why the two could not be compared)."""
    pieces = []
    for arm in ab.arms:
        reference = reference_of(ab, claim, arm)
        if arm == reference or arm in skip:
            continue
        arm_ids, ref_ids = ab.run_ids(arm), ab.run_ids(reference)
        for seed in sorted(set(arm_ids) & set(ref_ids), key=seed_key):
            paths = [_token_logprobs(store, run_id) for run_id in (arm_ids[seed], ref_ids[seed])]
            if None in paths:
                continue
            try:
                pair = load_token_logprobs(*paths)
            except ValueError as err:
                note = empty_token_gaps()
                note.loc[0, ["arm", "reference", "seed", "note", "bin", "count"]] = [arm, reference, seed, str(err), "", 0]
                pieces.append(note)
                break
            table = token_gap(pair.logp_s, pair.logp_b, bins="deciles")
            pieces.append(table.assign(arm=arm, reference=reference, seed=seed, note=""))
            break
    if not pieces:
        return empty_token_gaps()
    frame = pd.concat(pieces, ignore_index=True)[list(TOKEN_GAP_COLUMNS)]
    return frame.astype(empty_token_gaps().dtypes.to_dict())


def _token_logprobs(store: RunStore, run_id: str):
    found = store.find_artifacts(run_id, TOKEN_LOGPROBS)
    if not found:
        return None
    try:
        return store.download_artifact(run_id, found[0])
    except Exception:  # noqa: BLE001 - an artifact listed but not downloadable: skip it, say nothing false
        return None


def sv_hists_of(ab: Ablation, store: RunStore, skip: set[str] = frozenset()) -> list[SvHist]:
    """The runs' own singular-value histograms (diagnostic `sv_hist`), last step, first seed per arm (but the
    arms in `skip`)."""
    if not any(c.startswith("metrics.diag/gmcn/") for c in ab.finished.columns):
        return []
    found_hists = []
    for arm in ab.arms:
        ids = ab.run_ids(arm)
        if not ids or arm in skip:
            continue
        seed = sorted(ids, key=seed_key)[0]
        found = sorted(p for p in store.list_files(ids[seed], "diagnostics")
                       if p.rsplit("/", 1)[-1].startswith("sv_hist"))
        if not found:
            continue
        try:
            png = store.download_artifact(ids[seed], found[-1]).read_bytes()
        except Exception:  # noqa: BLE001 - listed but not downloadable: no figure rather than a false one
            continue
        found_hists.append(SvHist(arm, seed, found[-1], png))
    return found_hists

