"""How a real Optuna sweep spends its wall time, for `python -m sweeps.bench`.

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
from datetime import datetime
from pathlib import Path


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
