"""The study summary: best trial, trial table, parameter importances and plots, logged to the parent run."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from lit_modules.tracking.run_lifecycle import set_tags  # noqa: E402


def _importances(study: optuna.Study) -> dict[str, float]:
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2:
        return {}
    try:
        return dict(optuna.importance.get_param_importances(study))
    except Exception:  # noqa: BLE001 - e.g. a parameter that never varied
        return {}


def _plot_history(study: optuna.Study, path: Path) -> None:
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    fig, ax = plt.subplots(figsize=(6, 4))
    if complete:
        xs = [t.number for t in complete]
        ys = [t.value for t in complete]
        best = [min(ys[: i + 1]) if study.direction == optuna.study.StudyDirection.MINIMIZE else max(ys[: i + 1]) for i in range(len(ys))]
        ax.scatter(xs, ys, label="trial value")
        ax.step(xs, best, where="post", color="C1", label="best so far")
        ax.legend()
    ax.set_xlabel("trial number")
    ax.set_ylabel("objective")
    ax.set_title(f"Optimization history: {study.study_name}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plot_importances(importances: dict[str, float], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 1 + 0.5 * max(1, len(importances))))
    names = list(importances)[::-1]
    ax.barh(names, [importances[n] for n in names])
    ax.set_xlabel("importance (fANOVA)")
    ax.set_title("Parameter importances")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_summary(study: optuna.Study, cfg, client: MlflowClient, parent_run_id: str) -> Path:
    out = Path(cfg.runs_dir) / "sweeps" / cfg.study_name
    out.mkdir(parents=True, exist_ok=True)
    states = {}
    for t in study.trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    best = study.best_trial if complete else None
    importances = _importances(study)
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    summary = {
        "study": cfg.study_name,
        "metric": cfg.metric,
        "direction": cfg.direction,
        "states": states,
        "best": {"number": best.number, "value": best.value, "params": best.params} if best else None,
        "importances": importances,
        "pruned_at_steps": [max(t.intermediate_values) if t.intermediate_values else None for t in pruned],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    study.trials_dataframe().to_csv(out / "trials.csv", index=False)
    _plot_history(study, out / "optimization_history.png")
    if importances:
        _plot_importances(importances, out / "param_importances.png")
    lines = [f"# Sweep `{cfg.study_name}`", "", f"Objective: {cfg.direction} `{cfg.metric}`.", ""]
    lines.append("Trials: " + ", ".join(f"{n} {k.lower()}" for k, n in sorted(states.items())))
    if best:
        lines += ["", f"Best trial #{best.number}: {cfg.metric} = {best.value:.4f}", ""]
        lines += [f"- `{k}` = {v}" for k, v in best.params.items()]
    if importances:
        lines += ["", "Parameter importances:", ""] + [f"- `{k}`: {v:.2f}" for k, v in importances.items()]
    lines += ["", "![history](optimization_history.png)"]
    if importances:
        lines.append("![importances](param_importances.png)")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    client.log_artifacts(parent_run_id, str(out), artifact_path="summary")
    if best:
        client.log_metric(parent_run_id, f"best/{cfg.metric}", best.value)
        set_tags(client, parent_run_id, {"best_trial": str(best.number),
                                         **{f"best.{k}": str(v) for k, v in best.params.items()}})
    return out
