"""The run's Lightning logger writes one batch per logged step (each write is a database commit), holds
nothing back from the store past a save, a checkpoint or the end of training, and loses no metric."""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from lit_modules.config.composition import compose_run_config
from lit_modules.tracking.lightning_logger import MlflowRunLogger
from lit_modules.train import run
from tests.helpers.runs import metric_history, mlflow_client, tiny_overrides


def test_metrics_are_held_until_save_and_written_in_one_batch(tmp_path: Path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("x")).info.run_id
    logger = MlflowRunLogger(uri, run_id)
    writes = []
    original = MlflowClient.log_batch
    monkeypatch.setattr(MlflowClient, "log_batch", lambda self, *a, **k: writes.append(1) or original(self, *a, **k))
    logger.log_metrics({"tokens_seen": 64.0}, step=4)
    logger.log_metrics({"tokens_per_s": 10.0, "epoch": 0}, step=4)
    assert metric_history(client, run_id, "tokens_seen") == []
    logger.save()
    assert writes == [1]
    assert metric_history(client, run_id, "tokens_seen") == [(4, 64.0)]
    assert metric_history(client, run_id, "tokens_per_s") == [(4, 10.0)]
    assert metric_history(client, run_id, "epoch") == []
    logger.log_metrics({"val/loss": 2.0}, step=9)
    assert logger.has_metric_at("val/loss", 9)  # asking the store first writes what is held
    logger.log_metrics({"val/loss": 1.5}, step=19)
    logger.finalize("failed")
    assert metric_history(client, run_id, "val/loss") == [(9, 2.0), (19, 1.5)]


def test_a_run_writes_one_batch_per_logged_step_and_keeps_every_metric(runs_dir: Path, monkeypatch):
    writes = []
    original = MlflowClient.log_batch

    def counting(self, run_id, metrics=(), *args, **kwargs):
        if metrics and not any(m.key.startswith("init/") for m in metrics):
            writes.append(sorted({m.step for m in metrics}))
        return original(self, run_id, metrics, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", counting)
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=20)))  # logs every 5, validates every 10
    # Steps 4, 9, 14, 19 log (their validations at 9 and 19 are written with them or at the end), and the end of
    # the fit writes data/epochs once.
    assert len(writes) <= 7, writes
    client = mlflow_client(runs_dir)
    assert [s for s, _ in metric_history(client, result.run_id, "tokens_seen")] == [4, 9, 14, 19]
    assert [s for s, _ in metric_history(client, result.run_id, "tokens_per_s")] == [4, 9, 14, 19]
    assert [s for s, _ in metric_history(client, result.run_id, "train/loss")] == [4, 9, 14, 19]
    assert [s for s, _ in metric_history(client, result.run_id, "val/loss")] == [9, 19]
