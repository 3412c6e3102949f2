"""One line per finished trial (sweeps) or cell (ablations), and the best trial at the end.

    trial 4 COMPLETE val/loss=2.31 | optim.lr=0.00832, optim.weight_decay=0.1 | 12s | 5/16 done, elapsed 1m02s, ~2m25s left
    [3/24] pc_layer/adamw_pc4/seed1 FINISHED val/loss=1.76 | arm adamw_pc4, seed 1 | 35s | elapsed 2m01s, ~14m left
    best trial #7: val/loss=2.12 | optim.lr=0.0031, optim.weight_decay=0.05

Values are rounded to 3 significant digits (the study, MLflow and the CSVs keep them exact). The time
left assumes the remaining trials or cells take as long as the finished ones did, spread over the workers.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

import optuna
from mlflow.tracking import MlflowClient

from analysis.markdown import sig3
from lit_modules.callbacks.live_progress import clock
from lit_modules.runs import tags
from lit_modules.runs.search import children_filter

ENDED = ("FINISHED", "FAILED", "KILLED")


def _left(done_here: int, elapsed: float, remaining: int, workers: int) -> str:
    if done_here == 0 or remaining <= 0:
        return ""
    return f", ~{clock(elapsed / done_here * remaining / max(1, workers))} left"


def _params(params: dict) -> str:
    return ", ".join(f"{k}={sig3(v) if isinstance(v, float) else v}" for k, v in params.items()) or "no parameters"


class TrialLines:
    """An Optuna callback: one line per trial this worker ran, with the study's progress."""

    def __init__(self, n_trials: int, metric: str, workers: int, stream: TextIO | None = None):
        self.n_trials, self.metric, self.workers = n_trials, metric, workers
        self.stream = sys.stdout if stream is None else stream
        self.started = time.perf_counter()
        self.done_here = 0

    def __call__(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        self.done_here += 1
        state = trial.state.name
        if trial.state == optuna.trial.TrialState.COMPLETE:
            value = f"{self.metric}={sig3(trial.value)}"
        elif trial.state == optuna.trial.TrialState.PRUNED and trial.intermediate_values:
            step = max(trial.intermediate_values)
            value = f"pruned at step {step} ({self.metric}={sig3(trial.intermediate_values[step])})"
        else:
            value = str(trial.user_attrs.get("reason", "no value"))[:120]
        took = (trial.datetime_complete - trial.datetime_start).total_seconds() \
            if trial.datetime_complete and trial.datetime_start else 0.0
        done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,
                                                             optuna.trial.TrialState.PRUNED)))
        elapsed = time.perf_counter() - self.started
        print(f"trial {trial.number} {state} {value} | {_params(trial.params)} | {clock(took)} | "
              f"{done}/{self.n_trials} done, elapsed {clock(elapsed)}"
              f"{_left(self.done_here, elapsed, self.n_trials - done, self.workers)}", file=self.stream, flush=True)


def best_trial_line(study: optuna.Study, metric: str) -> str | None:
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not complete:
        return None
    best = study.best_trial
    return f"best trial #{best.number}: {metric}={sig3(best.value)} | {_params(best.params)}"


class CellWatcher:
    """While an ablation's cells run (in another process), print a line for each cell that ends.

    Every `poll_s` seconds it asks the store for the parent's children that started after it did and ended since
    the last one it printed; cells that ended before it started (a rerun's finished cells) are not counted. The
    store filters them (a grid of hundreds of runs read whole every poll cost about a core's second each time,
    half of a core taken from the cells it watches).
    """

    def __init__(self, client: MlflowClient, parent: str, to_run: int, metric: str = "val/loss",
                 poll_s: float = 2.0, stream: TextIO | None = None):
        self.client, self.parent, self.to_run = client, parent, to_run
        self.metric, self.poll_s = metric, poll_s
        self.stream = sys.stdout if stream is None else stream
        self.since_ms = int(time.time() * 1000)
        self.last_end_ms = self.since_ms  # the latest end time printed
        self.started = time.perf_counter()
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cell-watcher", daemon=True)

    def __enter__(self) -> "CellWatcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.poll()  # the cells that ended since the last look

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a busy store: look again next time
                continue

    def poll(self) -> None:
        experiment = self.client.get_run(self.parent).info.experiment_id
        # a minute's overlap: a cell's end time is stamped before its store write, which a busy store can delay
        recent = (f"{children_filter(self.parent)} and attributes.start_time >= {self.since_ms} "
                  f"and attributes.end_time >= {self.last_end_ms - 60_000}")
        ended = self.client.search_runs([experiment], filter_string=recent, order_by=["attributes.end_time ASC"],
                                        max_results=10_000)
        for run in ended:
            if run.info.run_id in self.seen or run.info.status not in ENDED:
                continue
            self.seen.add(run.info.run_id)
            self.last_end_ms = max(self.last_end_ms, run.info.end_time or self.last_end_ms)
            print(self.line(run), file=self.stream, flush=True)

    def line(self, run) -> str:
        value = run.data.metrics.get(self.metric)
        result = f"{self.metric}={sig3(value)}" if value is not None else \
            run.data.tags.get(tags.END_REASON, "no reason recorded")[:120]
        took = ((run.info.end_time or run.info.start_time) - run.info.start_time) / 1000
        elapsed = time.perf_counter() - self.started
        done = len(self.seen)
        return (f"[{done}/{self.to_run}] {run.info.run_name} {run.info.status} {result} | "
                f"arm {run.data.tags.get(tags.ABLATION_ARM, '?')}, seed {run.data.tags.get(tags.SEED, '?')} | "
                f"{clock(took)} | elapsed {clock(elapsed)}"
                # elapsed is wall time with the cells' parallelism in it: one "worker" of that pace
                f"{_left(done, elapsed, self.to_run - done, 1)}")
