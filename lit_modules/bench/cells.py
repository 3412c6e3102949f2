"""What a sweep trial or an ablation cell costs beyond its training steps, and how two workers scale.

- `cell_fixed_cost`: seconds of one `train.run` that are not training steps (compose, validate, data,
  model, MLflow run and artifacts, Trainer set-up and teardown), measured in a process that has already
  run one cell: sweep workers and ablation workers (Hydra's joblib/loky launcher) are kept alive across
  trials and cells, so that is the cost every cell after the first pays. The first cell's is reported too.
- `sweep_seconds`: a real Optuna sweep (`sweeps.optuna_sweep`, its own processes) from the first trial's
  start to the last trial's finish, read from the study; pruning off, so both layouts do the same work.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lightning as L

from lit_modules.config.composition import compose_run_config


class _TrainingWindow(L.Callback):
    """Wall time from the first training batch's start to the last one's end."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.start is None:
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.end = time.perf_counter()


def _one_cell_fixed_seconds(overrides: list[str], runs_dir: Path, steps: int) -> float:
    from lit_modules.train import run

    window = _TrainingWindow()
    started = time.perf_counter()
    cfg = compose_run_config(["regime=steps", f"trainer.max_steps={steps}", "trainer.val_every_n_steps=100000",
                              f"runs_dir={runs_dir}", *overrides])
    result = run(cfg, extra_callbacks=[window])
    total = time.perf_counter() - started
    if result.status != "FINISHED" or window.start is None:
        raise RuntimeError(f"the bench cell ended {result.status}")
    return total - (window.end - window.start)


def cell_fixed_cost(overrides: list[str], repeats: int, steps: int = 20) -> dict:
    """{"first_s": the first cell's fixed seconds in this process, "warm_s": one per later cell}."""
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the cells' store is the temporary runs_dir's
    with tempfile.TemporaryDirectory(prefix="bench-cells-") as tmp:
        first = _one_cell_fixed_seconds(overrides, Path(tmp), steps)
        warm = [_one_cell_fixed_seconds([*overrides, f"seed={i + 1}"], Path(tmp), steps) for i in range(repeats)]
    return {"first_s": first, "warm_s": warm}


def sweep_seconds(workers: int, trials: int, extra: list[str] = (), sweep: str = "lr_wd",
                  trial_seconds: list[float] | None = None) -> float:
    """First trial start to last trial finish of a fresh `trials`-trial sweep with `workers` workers (each
    with cores // workers threads, as the driver sets them); the median trial's own duration is appended
    to `trial_seconds` when given (how fast one trial runs on its share of the cores)."""
    import optuna

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        # The sweep's store, study and closing report all go to the scratch folder.
        env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
               "LLM_REPORTS_DIR": str(Path(tmp) / "reports")}
        command = [sys.executable, "-m", "sweeps.optuna_sweep", f"sweep={sweep}", f"sweep.n_trials={trials}",
                   f"sweep.workers={workers}", f"sweep.runs_dir={tmp}", "sweep.pruner.name=none", *extra]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"the bench sweep failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        storage = f"sqlite:///{Path(tmp) / 'optuna.db'}"
        names = optuna.study.get_all_study_names(storage)
        trials_done = optuna.load_study(study_name=names[0], storage=storage).get_trials(deepcopy=False)
    finished = [t for t in trials_done if t.datetime_complete is not None]
    if len(finished) < trials:
        raise RuntimeError(f"the bench sweep finished {len(finished)} of {trials} trials")
    first = min(t.datetime_start for t in finished)
    last = max(t.datetime_complete for t in finished)
    if trial_seconds is not None:
        trial_seconds.append(statistics.median((t.datetime_complete - t.datetime_start).total_seconds() for t in finished))
    return (last - first).total_seconds()
