"""A Lightning logger that writes into an MLflow run it does not own.

The run's lifecycle (create, resume, FINISHED/FAILED/KILLED) belongs to `run_lifecycle`; this logger
only appends metrics, so a resumed run continues the same MLflow run and a crash never ends FINISHED.
The client is created lazily and dropped on pickling, so spawned DDP workers can carry the logger.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

from lightning.pytorch.loggers.logger import Logger
from lightning.pytorch.utilities import rank_zero_only
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from lit_modules.tracking.run_lifecycle import stop_signals_deferred

MAX_METRICS_PER_BATCH = 1000  # MLflow's limit for one log_batch


class MlflowRunLogger(Logger):
    def __init__(self, tracking_uri: str, run_id: str):
        super().__init__()
        self._tracking_uri = tracking_uri
        self._run_id = run_id
        self._client: MlflowClient | None = None
        self._pending: list[Metric] = []  # logged, not yet written (see `save`)

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(self._tracking_uri)
        return self._client

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_client"] = None
        return state

    @property
    def name(self) -> str:
        return "mlflow"

    @property
    def version(self) -> str:
        return self._run_id

    @property
    def run_id(self) -> str:
        return self._run_id

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Held until `save()`: one store write per logged step, not one per callback (each write is a
        database commit, which costs a small model a tenth of its step time)."""
        now = int(time.time() * 1000)
        self._pending.extend(
            Metric(key, float(value), now, int(step or 0)) for key, value in metrics.items() if key != "epoch"
        )

    @rank_zero_only
    def save(self) -> None:
        """Write what is held. Lightning calls this after every step it logs; the checkpoint callback before
        every checkpoint (so a resumed run's history is never short of a step it restores); and finalize."""
        while self._pending:
            batch, self._pending = self._pending[:MAX_METRICS_PER_BATCH], self._pending[MAX_METRICS_PER_BATCH:]
            with stop_signals_deferred():  # a Ctrl-C mid-write could leave the store locked
                self.client.log_batch(self._run_id, metrics=batch, synchronous=True)

    def has_metric_at(self, key: str, step: int) -> bool:
        """Whether the run's history already holds `key` at `step` (asked by a resumed run before redoing)."""
        self.save()
        return any(m.step == step for m in self.client.get_metric_history(self._run_id, key))

    @rank_zero_only
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        with stop_signals_deferred():
            self.client.log_artifact(self._run_id, str(path), artifact_path=artifact_path)

    @rank_zero_only
    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        """Parameters are logged once, flattened, when the run is opened."""

    def finalize(self, status: str) -> None:
        """Writes what is held (also when training failed); the run's status is set by the code that
        opened it, not by Lightning."""
        self.save()
