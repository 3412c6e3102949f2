"""The study summary: best trial, trial table, parameter importances and plots, logged to the parent run.

Importances come from an evaluator chosen here, not Optuna's default of the day, and the summary names it:
PED-ANOVA (Optuna 5's default) compares the parameter distribution of the best `target_quantile` of the
complete trials with that of all of them, so in a small study the "best" group is one or two trials.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from analysis.markdown import sig3  # noqa: E402  (3 significant digits; exact values in summary.json)
from lit_modules.tracking.run_lifecycle import set_tags  # noqa: E402

from analysis.sweep_report import SUMMARY_ARTIFACTS  # noqa: E402  (the parent run's one copy of the summary)
IMPORTANCE_EVALUATOR = "PED-ANOVA"
FEW_TRIALS = 20  # below this many complete trials the best 10% is one or two trials: importances are rough
DPI = 100


def importance_evaluator() -> optuna.importance.BaseImportanceEvaluator:
    return optuna.importance.PedAnovaImportanceEvaluator()


def importance_caveat(complete: int) -> str | None:
    if complete >= FEW_TRIALS:
        return None
    return (f"Only {complete} complete trials: {IMPORTANCE_EVALUATOR} compares the best 10% of the trials with all "
            f"of them, so these importances rest on one or two trials (take them as a hint below {FEW_TRIALS}).")


def _importances(study: optuna.Study) -> dict[str, float]:
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if len(complete) < 2:
        return {}
    try:
        return dict(optuna.importance.get_param_importances(study, evaluator=importance_evaluator()))
    except Exception:  # noqa: BLE001 - e.g. a parameter that never varied
        return {}


def _save(ax, path: Path) -> None:
    fig = ax.figure
    fig.set_size_inches(6.5, 4.2)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def _plot_history(study: optuna.Study, metric: str, path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        ax = optuna.visualization.matplotlib.plot_optimization_history(study, target_name=metric)
    ax.set_xlabel("trial number")
    ax.set_ylabel(metric)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(f"Optimization history of {study.study_name} ({metric})")
    _save(ax, path)


def _plot_importances(study: optuna.Study, metric: str, path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            ax = optuna.visualization.matplotlib.plot_param_importances(
                study, evaluator=importance_evaluator(), target_name=metric)
    except Exception:  # noqa: BLE001 - the table above still says what could be computed
        plt.close("all")
        return False
    ax.set_xlabel(f"importance for {metric} ({IMPORTANCE_EVALUATOR})")
    ax.set_title(f"Parameter importances ({IMPORTANCE_EVALUATOR})")
    _save(ax, path)
    return True


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
        "importance_evaluator": IMPORTANCE_EVALUATOR,
        "pruned_at_steps": [max(t.intermediate_values) if t.intermediate_values else None for t in pruned],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    study.trials_dataframe().to_csv(out / "trials.csv", index=False)
    _plot_history(study, cfg.metric, out / "optimization_history.png")
    drew_importances = bool(importances) and _plot_importances(study, cfg.metric, out / "param_importances.png")
    lines = [f"# Sweep `{cfg.study_name}`", "", f"Objective: {cfg.direction} `{cfg.metric}`.", ""]
    lines.append("Trials: " + ", ".join(f"{n} {k.lower()}" for k, n in sorted(states.items())))
    if best:
        lines += ["", f"Best trial #{best.number}: {cfg.metric} = {sig3(best.value)}", ""]
        lines += [f"- `{k}` = {sig3(v)}" for k, v in best.params.items()]
    if importances:
        lines += ["", f"Parameter importances ({IMPORTANCE_EVALUATOR}):", ""]
        lines += [f"- `{k}`: {v:.2f}" for k, v in importances.items()]
        caveat = importance_caveat(len(complete))
        if caveat:
            lines += ["", f"_{caveat}_"]
    lines += ["", "![history](optimization_history.png)"]
    if drew_importances:
        lines.append("![importances](param_importances.png)")
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    client.log_artifacts(parent_run_id, str(out), artifact_path=SUMMARY_ARTIFACTS)
    if best:
        client.log_metric(parent_run_id, f"best/{cfg.metric}", best.value)
        set_tags(client, parent_run_id, {"best_trial": str(best.number),
                                         **{f"best.{k}": str(v) for k, v in best.params.items()}})
    return out
