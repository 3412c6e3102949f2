"""Sweep and ablation progress: one line per finished trial or cell, and the best trial at the end."""

import io
import time
from pathlib import Path

import optuna
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from lit_modules.tracking.run_lifecycle import open_run
from lit_modules.tracking.store import get_or_create_experiment, tracking_uri
from sweeps.progress_lines import CellWatcher, TrialLines, best_trial_line


def test_one_line_per_trial_with_value_params_and_progress_then_the_best() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    out = io.StringIO()
    lines = TrialLines(n_trials=3, metric="val/loss", workers=1, stream=out)
    study.optimize(lambda t: 0.0123 + 1e-7 * t.suggest_float("optim.lr", 1e-3, 1e-2), n_trials=3, callbacks=[lines])
    printed = out.getvalue().strip().splitlines()
    assert len(printed) == 3
    assert printed[0].startswith("trial 0 COMPLETE val/loss=0.0123") and "optim.lr=0.00" in printed[0]
    assert "| 1/3 done, elapsed" in printed[0] and "left" in printed[0]
    assert "| 3/3 done" in printed[2] and "left" not in printed[2]
    best = study.best_trial
    assert best_trial_line(study, "val/loss") == (
        f"best trial #{best.number}: val/loss={best.value:.3g} | optim.lr={best.params['optim.lr']:.3g}")


def test_the_watcher_prints_each_cell_that_ended_since_it_started(tmp_path: Path) -> None:
    client = MlflowClient(tracking_uri(None, str(tmp_path)))
    exp = get_or_create_experiment(client, "runs", str(tmp_path))
    parent = open_run(client, exp, "ablate:smoke", {}, {})
    before = open_run(client, exp, "smoke/baseline/seed0", {"ablation.arm": "baseline", "seed": "0"}, {}, parent)
    client.set_terminated(before, "FINISHED")  # a rerun's finished cell: not counted
    time.sleep(0.01)
    out = io.StringIO()
    watcher = CellWatcher(client, parent, to_run=2, stream=out)
    for seed, status in ((1, "FINISHED"), (2, "FAILED")):
        cell = open_run(client, exp, f"smoke/baseline/seed{seed}", {"ablation.arm": "baseline", "seed": str(seed),
                                                                    "end_reason": "boom"}, {}, parent)
        if status == "FINISHED":
            client.log_batch(cell, metrics=[Metric("val/loss", 2.34567, 0, 9)])
        client.set_terminated(cell, status)
    watcher.poll()
    watcher.poll()  # nothing twice
    printed = out.getvalue().strip().splitlines()
    assert len(printed) == 2
    assert printed[0].startswith("[1/2] smoke/baseline/seed1 FINISHED val/loss=2.35 | arm baseline, seed 1 |")
    assert printed[1].startswith("[2/2] smoke/baseline/seed2 FAILED boom | arm baseline, seed 2 |")


def test_the_watcher_asks_the_store_for_recent_ends_only_and_still_prints_a_late_write(tmp_path: Path) -> None:
    client = MlflowClient(tracking_uri(None, str(tmp_path)))
    exp = get_or_create_experiment(client, "runs", str(tmp_path))
    parent = open_run(client, exp, "ablate:smoke", {}, {})
    out = io.StringIO()
    watcher = CellWatcher(client, parent, to_run=3, stream=out)
    cells = [open_run(client, exp, f"smoke/baseline/seed{s}", {"ablation.arm": "baseline", "seed": str(s)}, {}, parent)
             for s in range(3)]
    now = int(time.time() * 1000)
    client.set_terminated(cells[0], "FINISHED", end_time=now + 2_000)
    watcher.poll()
    # seed 1 ended before seed 0 but reached the store after the poll that printed seed 0; seed 2 still runs
    client.set_terminated(cells[1], "FINISHED", end_time=now + 1_000)
    filters = []
    search = client.search_runs
    client.search_runs = lambda *a, **k: filters.append(k["filter_string"]) or search(*a, **k)
    watcher.poll()
    printed = out.getvalue().strip().splitlines()
    assert [line.split()[1] for line in printed] == ["smoke/baseline/seed0", "smoke/baseline/seed1"]
    assert f"attributes.end_time >= {now + 2_000 - 60_000}" in filters[0]  # what ended since the last line, less a minute
    assert f"attributes.start_time >= {watcher.since_ms}" in filters[0]
