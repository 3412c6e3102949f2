"""Runs for tests: a few-second tiny config, and the MLflow store a test's runs went into."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def tiny_overrides(runs_folder: Path, steps: int = 20, **extra: str) -> list[str]:
    """A run of a few seconds: CPU-tiny model, short sequences, a fixed number of steps; `extra` overrides
    any of them (runs_dir= too)."""
    base = {
        "regime": "steps",
        "trainer.max_steps": str(steps),
        "trainer.val_every_n_steps": "10",
        "trainer.log_every_n_steps": "5",
        "data.seq_len": "64",
        "data.batch_size": "8",
        "data.val_batches": "4",
        "runs_dir": str(runs_folder),
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def mlflow_client(runs_dir: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{Path(runs_dir).resolve() / 'mlflow.db'}")


def metric_history(store, run_id: str, key: str) -> list[tuple[int, float]]:
    """(step, value) of one metric of a run, in order; `store` is a runs folder or an MlflowClient."""
    client = mlflow_client(store) if isinstance(store, (str, Path)) else store
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def all_runs(runs_dir: Path) -> list:
    """Every run in every experiment of the store (empty if the store was never created)."""
    if not (Path(runs_dir) / "mlflow.db").exists():
        return []
    client = mlflow_client(runs_dir)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids) if ids else []
