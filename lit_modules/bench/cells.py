"""What a sweep trial or an ablation cell costs beyond its training steps.

- `cell_fixed_cost`: seconds of one `train.run` that are not training steps (compose, validate, data,
  model, MLflow run and artifacts, Trainer set-up and teardown), measured in a process that has already
  run one cell: sweep workers and ablation workers (Hydra's joblib/loky launcher) are kept alive across
  trials and cells, so that is the cost every cell after the first pays. The first cell's is reported too.
  Wall clock (it waits on the store's files and SQLite); `fixed_cost_phases` profiles one warm cell and
  names where its seconds go.

How two sweep workers scale is measured in sweeps/bench_timeline.py (it starts `sweeps.optuna_sweep`, which
nothing in lit_modules may do).
"""

from __future__ import annotations

import os
import tempfile
import time
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
