"""A results folder from its protocol as it is now meets the evidence bar: a ladder of at least 4 rungs spanning
16x over at least 3 depths, data read at most once by every run, primary rows on the confirmatory seeds alone with
both p-values printed, and a null and a positive control at every rung. A folder from an earlier revision of its
protocol is skipped (its rerun is pending, and its header and RESULTS.md say so); so is the ladder's span in a
partial export, one whose declared stages have not all run (the `l6` stage takes many sessions), which must say so
in its report and in RESULTS.md; the controls of a rung whose stage is still running are checked once it ran."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.controls import (DETECTED, EFFECT_CALLED, NO_EFFECT_CALLED, NOT_DETECTED, NULL_ROLE, POSITIVE_ROLE,
                               WRONG_SIDE)
from analysis.protocol_revision import is_superseded, pending_line, pending_stages
from analysis.results_data import read_results_data
from analysis.rungs import is_ladder_arm, rung_of
from analysis.verdict import PRIMARY
from tests.helpers.committed_cells import PAPERS

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _current(paper: str) -> Path:
    folder = RESULTS / paper
    record_path = folder / "provenance.json"
    if not record_path.is_file():
        pytest.skip(f"results/{paper} has no export")
    if is_superseded(f"evidence/{paper}", json.loads(record_path.read_text())):
        pytest.skip(f"results/{paper} is from an earlier revision of conf/evidence/{paper}.yaml")
    return folder


@pytest.mark.parametrize("paper", PAPERS)
def test_every_run_read_its_data_at_most_once(paper: str) -> None:
    runs = pd.read_csv(_current(paper) / "data" / "runs.csv", low_memory=False)
    epochs = pd.to_numeric(runs["metrics.data/epochs"], errors="coerce")
    assert (epochs.dropna() <= 1.0).all(), f"largest data/epochs {epochs.max()}"
    # A run interrupted before runs logged it when stopped did not log it: it stopped earlier than its cell's
    # finished run, so it read less than that run did.
    finished = runs[(runs["status"] == "FINISHED") & epochs.notna()]
    rerun = set(zip(finished["tags.ablation.arm"], finished["tags.seed"]))
    silent = runs[epochs.isna()]
    unexplained = [f"{a} seed {s} ({st})" for a, s, st in zip(silent["tags.ablation.arm"], silent["tags.seed"],
                                                               silent["status"]) if st == "FINISHED" or (a, s) not in rerun]
    assert not unexplained, f"runs without data/epochs and no finished run of their cell that logged it: {unexplained}"


def _pending(folder: Path) -> str:
    return pending_line(json.loads((folder / "provenance.json").read_text()), read_results_data(folder).runs)


@pytest.mark.parametrize("paper", PAPERS)
def test_a_partial_export_says_so_in_its_report_and_in_results_md(paper: str) -> None:
    folder = _current(paper)
    line = _pending(folder)
    if not line:
        pytest.skip(f"results/{paper} ran every declared stage")
    assert line in (folder / "report.md").read_text()
    assert line in (RESULTS.parent / "RESULTS.md").read_text()


@pytest.mark.parametrize("paper", PAPERS)
def test_the_ladder_has_four_rungs_over_sixteen_fold_and_three_depths(paper: str) -> None:
    folder = _current(paper)
    if line := _pending(folder):
        pytest.skip(f"results/{paper}: {line}")
    rungs = pd.read_csv(folder / "rungs.csv", keep_default_na=False)
    ladder = rungs[rungs["rung"].map(lambda r: is_ladder_arm(f"x@{str(r).split('@')[-1]}"))]
    sizes = ladder.drop_duplicates("model")
    assert len(sizes) >= 4, f"rungs: {list(sizes['model'])}"
    params = sizes["params_non_embedding"].astype(float)
    assert params.max() / params.min() >= 16 and sizes["n_layers"].nunique() >= 3


@pytest.mark.parametrize("paper", PAPERS)
def test_primary_rows_use_only_confirmatory_seeds_and_print_both_p_values(paper: str) -> None:
    folder = _current(paper)
    confirmatory = {str(s) for s in json.loads((folder / "provenance.json").read_text())["confirmatory_seeds"]}
    verdicts = pd.read_csv(folder / "verdicts.csv", keep_default_na=False)
    primary = verdicts[verdicts["role"] == PRIMARY]
    if primary.empty and (line := _pending(folder)):
        pytest.skip(f"results/{paper}: {line}")
    assert len(primary)
    for _, row in primary.iterrows():
        assert set(str(row["seeds"]).split(",")) <= confirmatory, row["arm"]
        assert math.isfinite(float(row["p_sign_flip"])) and math.isfinite(float(row["p_t"])), row["arm"]


@pytest.mark.parametrize("paper", PAPERS)
def test_a_null_and_a_positive_control_at_every_rung(paper: str) -> None:
    folder = _current(paper)
    verdicts = pd.read_csv(folder / "verdicts.csv", keep_default_na=False)
    record = json.loads((folder / "provenance.json").read_text())
    confirmatory = len(record["confirmatory_seeds"])
    # A stage still running (a partial export) may lack any of its cells yet: its rungs are judged once it ran.
    pending = pending_stages(record, read_results_data(folder).runs)
    running = {rung_of(a) for b in record["declared_seeds"] if b.get("stage", "headline") in pending
               for a in b["arms"] if is_ladder_arm(a)}
    rungs = {rung_of(a) for a in verdicts["arm"] if is_ladder_arm(a)} - running
    if not rungs and pending:
        pytest.skip(f"results/{paper}: {_pending(folder)}")
    assert rungs, "no verdict row at a ladder rung"
    for role, judged in ((NULL_ROLE, {EFFECT_CALLED, NO_EFFECT_CALLED}), (POSITIVE_ROLE, {DETECTED, NOT_DETECTED, WRONG_SIDE})):
        rows = verdicts[verdicts["role"] == role]
        rows = rows[~rows["arm"].map(rung_of).isin(running)]
        controlled = {rung_of(a) for a in rows["arm"]}
        assert rungs <= controlled, f"{role} missing at {sorted(rungs - controlled)}"
        undecided = rows[~rows["verdict"].isin(judged) | (rows["n"].astype(int) < confirmatory)]
        assert undecided.empty, f"{role} rows not judged on every confirmatory seed: {list(undecided['arm'])}"
