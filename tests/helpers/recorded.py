"""Everything a tracking store keeps about some runs, as text: to prove that a secret is in none of it."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Iterator

from mlflow.tracking import MlflowClient

TEXT_SUFFIXES = (".md", ".json", ".yaml", ".yml", ".csv", ".txt", ".patch")


def recorded_texts(client: MlflowClient, experiment_ids: list[str]) -> Iterator[tuple[str, str]]:
    """(where, text) for every param, tag and text artifact of every run in the experiments."""
    for run in client.search_runs(experiment_ids, max_results=1000):
        run_id = run.info.run_id
        for key, value in {**run.data.params, **run.data.tags}.items():
            yield f"{run_id} {key}", value
        with tempfile.TemporaryDirectory() as tmp:
            for path in _artifact_files(client, run_id):
                if path.endswith(TEXT_SUFFIXES):
                    local = Path(client.download_artifacts(run_id, path, tmp))
                    yield f"{run_id} artifact {path}", local.read_text(errors="replace")


def _artifact_files(client: MlflowClient, run_id: str, path: str | None = None) -> Iterator[str]:
    for entry in client.list_artifacts(run_id, path):
        if entry.is_dir:
            yield from _artifact_files(client, run_id, entry.path)
        else:
            yield entry.path


def places_holding(secret: str, texts: Iterator[tuple[str, str]]) -> list[str]:
    return [where for where, text in texts if secret in text]
