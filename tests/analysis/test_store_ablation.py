"""How a report names the store it read its runs from."""

from pathlib import Path

from analysis.store_ablation import store_name


def test_a_local_store_below_the_working_folder_is_named_relative(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert store_name(f"sqlite:///{tmp_path / 'runs' / 'mlflow.db'}") == "sqlite:///runs/mlflow.db"
    assert store_name("sqlite:////elsewhere/mlflow.db") == "sqlite:////elsewhere/mlflow.db"


def test_a_server_url_keeps_no_password() -> None:
    assert store_name("postgresql+psycopg://llm:secret@db/mlflow") == "postgresql+psycopg://llm:***@db/mlflow"
    assert store_name("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
