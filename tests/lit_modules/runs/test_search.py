"""Runs found by their tags in a real (tmp) MLflow store: parents, a grid's bases, a base's fine-tune."""

from __future__ import annotations

import time

from lit_modules.runs import tags
from lit_modules.runs.search import ABLATION, SWEEP, find_parent, finished_finetune, grid_bases, parent_tags
from lit_modules.tracking.run_lifecycle import open_run
from lit_modules.tracking.store import get_or_create_experiment
from tests.helpers.runs import mlflow_client


def _run(client, experiment, tags_: dict, parent: str | None = None, status: str = "FINISHED") -> str:
    run_id = open_run(client, experiment, None, tags_, {}, parent)
    client.set_terminated(run_id, status=status)
    time.sleep(0.002)  # distinct start times order the runs
    return run_id


def test_parents_bases_and_finetunes(tmp_path):
    client = mlflow_client(tmp_path)
    experiment = get_or_create_experiment(client, "default", str(tmp_path))
    assert find_parent(client, "grid") is None
    _run(client, experiment, parent_tags(ABLATION, "grid"))
    study = _run(client, experiment, parent_tags(SWEEP, "study"))
    parent = _run(client, experiment, parent_tags(ABLATION, "grid"))  # a newer parent of the same grid
    assert find_parent(client, "grid").info.run_id == parent
    assert find_parent(client, "study").info.run_id == study and find_parent(client, "study", kinds=(ABLATION,)) is None

    cell = {tags.ABLATION_ARM: "a", tags.SEED: "0"}
    _run(client, experiment, cell, parent)                      # an older finished run of the same cell
    newest = _run(client, experiment, cell, parent)
    other = _run(client, experiment, {tags.ABLATION_ARM: "b", tags.SEED: "0"}, parent)
    _run(client, experiment, {tags.ABLATION_ARM: "c", tags.SEED: "0"}, parent, status="FAILED")
    _run(client, experiment, {tags.FINETUNE_BASE: newest}, parent)  # never a base itself
    bases = grid_bases(client, client.get_run(parent))
    assert [b.info.run_id for b in bases] == [newest, other]

    base = client.get_run(newest)
    assert finished_finetune(client, base, "h1") is None
    _run(client, experiment, {tags.FINETUNE_BASE: newest, tags.FINETUNE_RECIPE_HASH: "h1"}, newest)
    latest = _run(client, experiment, {tags.FINETUNE_BASE: newest, tags.FINETUNE_RECIPE_HASH: "h1"}, newest)
    _run(client, experiment, {tags.FINETUNE_BASE: newest, tags.FINETUNE_RECIPE_HASH: "h2"}, newest)
    assert finished_finetune(client, base, "h1").info.run_id == latest
