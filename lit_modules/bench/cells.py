"""What a sweep trial or an ablation cell costs beyond its training steps, and how two workers scale.

- `cell_fixed_cost`: seconds of one `train.run` that are not training steps (compose, validate, data,
  model, MLflow run and artifacts, Trainer set-up and teardown), measured in a process that has already
  run one cell: sweep workers and ablation workers (Hydra's joblib/loky launcher) are kept alive across
  trials and cells, so that is the cost every cell after the first pays. The first cell's is reported too.
  Wall clock (it waits on the store's files and SQLite); `fixed_cost_phases` profiles one warm cell and
  names where its seconds go.
- `sweep_seconds` / `sweep_timeline`: a real Optuna sweep (`sweeps.optuna_sweep`, its own processes) from the
  first trial's start to the last trial's finish, read from the study; pruning off, so both layouts do the
  same work. Wall clock (several processes). The timeline also says where a two-worker sweep loses time:
  the second worker's late start (its process imports while the first trains), the gaps between one
  worker's trials (Optuna's bookkeeping, the trial's compose) and the tail.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import lightning as L

from lit_modules.config.composition import compose_run_config


class _TrainingWindow(L.Callback):
    """Wall and thread CPU time from the first training batch's start to the last one's end."""

    def __init__(self) -> None:
        self.start: tuple[float, float] | None = None
        self.end: tuple[float, float] | None = None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self.start is None:
            self.start = (time.perf_counter(), time.thread_time())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.end = (time.perf_counter(), time.thread_time())


def _one_cell_fixed(overrides: list[str], runs_dir: Path, steps: int, callbacks: list = ()) -> tuple[float, float]:
    """(wall, thread CPU) seconds of one cell that are not its training steps."""
    from lit_modules.train import run

    window = _TrainingWindow()
    started = (time.perf_counter(), time.thread_time())
    cfg = compose_run_config(["regime=steps", f"trainer.max_steps={steps}", "trainer.val_every_n_steps=100000",
                              f"runs_dir={runs_dir}", *overrides])
    result = run(cfg, extra_callbacks=[window, *callbacks])
    ended = (time.perf_counter(), time.thread_time())
    if result.status != "FINISHED" or window.start is None:
        raise RuntimeError(f"the bench cell ended {result.status}")
    return tuple((e - s) - (we - ws) for e, s, we, ws in zip(ended, started, window.end, window.start))


def _one_cell_fixed_seconds(overrides: list[str], runs_dir: Path, steps: int, callbacks: list = ()) -> float:
    return _one_cell_fixed(overrides, runs_dir, steps, callbacks)[0]


def cell_fixed_cost(overrides: list[str], repeats: int, steps: int = 20, phases: bool = False) -> dict:
    """{"first_s": the first cell's fixed seconds in this process, "warm_s": one per later cell (wall),
    "warm_thread_s": the same cells' thread CPU seconds (what of it is not waiting)}; with `phases`, also
    "phases": where one more warm cell's fixed seconds go (`fixed_cost_phases`)."""
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the cells' store is the temporary runs_dir's
    with tempfile.TemporaryDirectory(prefix="bench-cells-") as tmp:
        first = _one_cell_fixed_seconds(overrides, Path(tmp), steps)
        warm = [_one_cell_fixed([*overrides, f"seed={i + 1}"], Path(tmp), steps) for i in range(repeats)]
        out = {"first_s": first, "warm_s": [w for w, _ in warm], "warm_thread_s": [t for _, t in warm]}
        if phases:
            out["phases"] = fixed_cost_phases([*overrides, f"seed={repeats + 1}"], Path(tmp), steps)
    return out


# function name -> phase: what a cell does besides its training steps (found by name wherever it lives).
PHASES = {
    "compose_run_config": "compose (Hydra)",
    "validated": "validate and build techniques",
    "build_data": "data",
    "build_model": "model",
    "git_state": "git state",
    "open_new_run": "open the MLflow run",
    "log_start_artifacts": "start artifacts",
    "build_trainer": "build the Trainer",
    "evaluate_after_training": "evaluation",
}

# A file's package -> what it is doing in a cell (first match). Time in any other file (the standard library,
# C functions, small packages) counts for the packages that called it (`_owners`).
PACKAGES = (
    (("/hydra/", "/omegaconf/", "/antlr4/"), "Hydra/OmegaConf"),
    (("/mlflow/",), "MLflow"),
    (("/sqlalchemy/", "/alembic/"), "SQLAlchemy/SQLite"),
    (("/lightning/", "/lightning_fabric/", "/torchmetrics/"), "Lightning"),
    (("/torch/",), "torch"),
    (("/lit_modules/", "/sweeps/"), "lit_modules"),
    (("/yaml/",), "YAML"),
)
OTHER = "other"


def package_of(path: str) -> str | None:
    for needles, name in PACKAGES:
        if any(n in path for n in needles):
            return name
    return None


def _owners(stats: dict) -> dict:
    """function key -> {package: share}: a package's own function is its own; any other function's time is
    shared among its callers' owners, in proportion to the time each call took (OTHER when it has none)."""
    owners: dict = {}

    def owner(key, visiting: frozenset) -> dict[str, float]:
        if key in owners:
            return owners[key]
        package = package_of(key[0])
        if package is not None:
            result = {package: 1.0}
        else:
            callers = stats[key][4]
            weights = {c: v[3] for c, v in callers.items() if c in stats and c not in visiting and v[3] > 0}
            total = sum(weights.values())
            if not total:
                result = {OTHER: 1.0}
            else:
                result = {}
                for caller, weight in weights.items():
                    for name, share in owner(caller, visiting | {key}).items():
                        result[name] = result.get(name, 0.0) + share * weight / total
        owners[key] = result
        return result

    return {key: owner(key, frozenset()) for key in stats}


class _ProfileFixedOnly(L.Callback):
    """Pauses the profiler over the training steps: what it sees is the cell's fixed cost."""

    def __init__(self, profiler) -> None:
        self.profiler, self.paused = profiler, False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self.paused:
            self.profiler.disable()
            self.paused = True

    def on_train_end(self, trainer, pl_module):
        self.profiler.enable()


def fixed_cost_phases(overrides: list[str], runs_dir: Path, steps: int) -> dict:
    """One warm cell's fixed cost under cProfile (paused over its training steps): its self time by package
    (`package_of`; the standard library and C functions count for the package that called them) and the
    cumulative seconds of the named phases (`PHASES`) found. Profiled seconds are inflated: their shares
    are what to read."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    fixed = _one_cell_fixed_seconds(overrides, runs_dir, steps, callbacks=[_ProfileFixedOnly(profiler)])
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # (file, line, function) -> (cc, nc, tottime, cumtime, callers)
    owners = _owners(stats)
    by_package: dict[str, float] = {}
    phases: dict[str, float] = {}
    for key, (_, _, tottime, cumulative, _) in stats.items():
        for name, share in owners[key].items():
            by_package[name] = by_package.get(name, 0.0) + tottime * share
        if key[2] in PHASES and "/lit_modules/" in key[0]:
            phases[PHASES[key[2]]] = max(phases.get(PHASES[key[2]], 0.0), cumulative)
    total = sum(by_package.values()) or 1.0
    return {"profiled_fixed_s": fixed,
            "package_shares": {k: v / total for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])},
            "phase_shares": {k: v / total for k, v in sorted(phases.items(), key=lambda kv: -kv[1])}}


def sweep_timeline(workers: int, trials: int, extra: list[str] = (), sweep: str = "lr_wd") -> dict:
    """One fresh `trials`-trial sweep with `workers` workers (each with cores // workers threads, as the
    driver sets them), read back from its study: seconds relative to the first trial's start.

    {"span_s": first trial start to last trial finish, "trials": [(start, end)], "workers": [[trial index]]
    (trials assigned to workers by chaining: a worker's next trial starts after its last ended),
    "startup_s": command start to first trial start, "teardown_s": last trial finish to command end}."""
    import optuna

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        # The sweep's store, study and closing report all go to the scratch folder.
        env = {**{k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"},
               "LLM_REPORTS_DIR": str(Path(tmp) / "reports")}
        command = [sys.executable, "-m", "sweeps.optuna_sweep", f"sweep={sweep}", f"sweep.n_trials={trials}",
                   f"sweep.workers={workers}", f"sweep.runs_dir={tmp}", "sweep.pruner.name=none", *extra]
        launched = datetime.now()
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        ended = datetime.now()
        if done.returncode != 0:
            raise RuntimeError(f"the bench sweep failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        storage = f"sqlite:///{Path(tmp) / 'optuna.db'}"
        names = optuna.study.get_all_study_names(storage)
        trials_done = optuna.load_study(study_name=names[0], storage=storage).get_trials(deepcopy=False)
    finished = [t for t in trials_done if t.datetime_complete is not None]
    if len(finished) < trials:
        raise RuntimeError(f"the bench sweep finished {len(finished)} of {trials} trials")
    first = min(t.datetime_start for t in finished)
    spans = sorted(((t.datetime_start - first).total_seconds(), (t.datetime_complete - first).total_seconds())
                   for t in finished)
    return {"span_s": max(end for _, end in spans), "trials": spans, "workers": assign_workers(spans),
            "startup_s": (first - launched).total_seconds(),
            "teardown_s": (ended - max(t.datetime_complete for t in finished)).total_seconds()}


def assign_workers(spans: list[tuple[float, float]]) -> list[list[int]]:
    """Trials (start, end), sorted by start, chained into workers: each trial goes to the worker whose last
    trial ended latest before it started (a new worker when none has ended)."""
    workers: list[list[int]] = []
    for index, (start, _) in enumerate(spans):
        free = [w for w in workers if spans[w[-1]][1] <= start + 1e-6]
        if free:
            max(free, key=lambda w: spans[w[-1]][1]).append(index)
        else:
            workers.append([index])
    return workers


def timeline_losses(timeline: dict) -> dict:
    """Where a sweep's span goes besides its trials: the later workers' start skew, the median gap between
    one worker's consecutive trials, and the tail (last finish minus the first worker's to finish)."""
    spans, workers = timeline["trials"], timeline["workers"]
    starts = sorted(spans[w[0]][0] for w in workers)
    gaps = [spans[b][0] - spans[a][1] for w in workers for a, b in zip(w, w[1:])]
    ends = sorted(spans[w[-1]][1] for w in workers)
    return {"start_skew_s": starts[-1] - starts[0], "median_gap_s": statistics.median(gaps) if gaps else 0.0,
            "tail_s": ends[-1] - ends[0], "median_trial_s": statistics.median(e - s for s, e in spans)}


def sweep_seconds(workers: int, trials: int, extra: list[str] = (), sweep: str = "lr_wd",
                  trial_seconds: list[float] | None = None, timelines: list[dict] | None = None) -> float:
    """First trial start to last trial finish of a fresh sweep (`sweep_timeline`); the median trial's own
    duration is appended to `trial_seconds` when given (how fast one trial runs on its share of the cores),
    the whole timeline to `timelines`."""
    timeline = sweep_timeline(workers, trials, extra, sweep)
    if trial_seconds is not None:
        trial_seconds.append(statistics.median(end - start for start, end in timeline["trials"]))
    if timelines is not None:
        timelines.append(timeline)
    return timeline["span_s"]
