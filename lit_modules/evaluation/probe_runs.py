"""Linear probes of finished runs, logged into those runs (`eval/probe/...`).

Labels: which held-out document (play) a passage comes from; features: each layer's mean-pooled residual
stream (lit_modules.evaluation.probes). A run that already has `eval/probe/best_acc` is left alone, so
probing a grid again only probes what is new. Used by the plasticity pipeline on its base runs.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from lit_modules.config.errors import ConfigError
from lit_modules.config.errors import EvalError
from lit_modules.data import DataError
from lit_modules.data.documents import iter_documents
from lit_modules.evaluation.probes import run_probes
from lit_modules.rebuild import inference_view
from lit_modules.runs.finished import finished_run

PROBE_BEST = "eval/probe/best_acc"
MAX_PROBE_LEN = 128  # passage length in tokens, never beyond the trained length


def probe_finished_runs(client: MlflowClient, run_ids: Iterable[str]) -> str:
    """Probe every run not probed yet; returns a one-line status (or why probing stopped)."""
    done = already = 0
    for run_id in run_ids:
        if PROBE_BEST in client.get_run(run_id).data.metrics:
            already += 1
            continue
        try:
            loaded = inference_view(finished_run(client, run_id))
            documents = list(iter_documents(loaded.corpus.heldout_path))
            seq_len = min(MAX_PROBE_LEN, int(loaded.config.data.seq_len))
            result = run_probes(loaded.model, loaded.tokenizer, documents, seq_len=seq_len, device="cpu")
        except (EvalError, ConfigError, DataError) as err:
            return f"linear probes skipped: {err}"
        now = int(time.time() * 1000)
        metrics = [Metric(k, float(v), now, loaded.step) for k, v in result.metrics().items()]
        client.log_batch(run_id, metrics=metrics)
        done += 1
    return (f"linear probes (held-out document labels, per layer, `eval/probe/*` on the base runs): "
            f"{done} base runs probed now, {already} already had them")
