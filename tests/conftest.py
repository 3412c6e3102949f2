"""Shared fixtures: every test that trains writes its runs under a pytest tmp folder, never runs/."""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # tests use their own store under tmp_path
# Reports that sweeps and ablations write at the end go to a scratch folder, never the repo's reports/.
os.environ["LLM_REPORTS_DIR"] = tempfile.mkdtemp(prefix="llm-ablate-reports-")

import logging
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Fixtures that start throwaway PostgreSQL and MLflow servers (used by tests/distributed/).
pytest_plugins = ["helpers.servers"]

# Lightning and MLflow are chatty at INFO; failures still show their output.
for name in ("lightning.pytorch", "lightning.fabric", "mlflow", "alembic"):
    logging.getLogger(name).setLevel(logging.WARNING)


def tiny_overrides(runs_dir: Path, steps: int = 20, **extra: str) -> list[str]:
    """A run of a few seconds: CPU-tiny model, short sequences, a fixed number of steps."""
    base = {
        "regime": "steps",
        "trainer.max_steps": str(steps),
        "trainer.val_every_n_steps": "10",
        "trainer.log_every_n_steps": "5",
        "data.seq_len": "64",
        "data.batch_size": "8",
        "data.val_batches": "4",
        "runs_dir": str(runs_dir),
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def mlflow_client(runs_dir: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{Path(runs_dir).resolve() / 'mlflow.db'}")


def all_runs(runs_dir: Path) -> list:
    """Every run in every experiment of the store (empty if the store was never created)."""
    if not (Path(runs_dir) / "mlflow.db").exists():
        return []
    client = mlflow_client(runs_dir)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids) if ids else []


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"
