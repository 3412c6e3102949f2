"""A new experiment keeps its artifacts where every machine can reach them: under the runs folder for a
store this process writes itself, through the server (its own default) for a tracking server."""

from pathlib import Path

import pytest

from lit_modules.tracking.store import artifact_location, artifact_root


@pytest.mark.parametrize("uri", ["http://127.0.0.1:5000", "https://mlflow.lab.org", "databricks"])
def test_a_tracking_server_decides_where_artifacts_go(uri: str) -> None:
    assert artifact_location(uri, "runs") is None


@pytest.mark.parametrize("uri", ["sqlite:////tmp/runs/mlflow.db", "postgresql+psycopg://u@db/mlflow", "file:///tmp/mlruns"])
def test_a_store_written_directly_keeps_artifacts_under_the_runs_folder(uri: str, tmp_path: Path) -> None:
    assert artifact_location(uri, str(tmp_path)) == artifact_root(str(tmp_path)) == (tmp_path / "mlartifacts").as_uri()
