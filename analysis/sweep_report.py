"""A sweep's report: the best trials of an Optuna study's parent run and the study summary it logged.

    python -m analysis.report EXP=<study>        # the same verb as an ablation's report
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.entities import Run

from analysis import markdown as md
from analysis import plots
from analysis.load_runs import RunStore
from analysis.results_data import safe_name
from analysis.html_report import write_html
from analysis.sections import ARTIFACT_PATH, REPORT_FILE, fresh_dir, reports_root
from lit_modules.runs import tags
from lit_modules.runs.uri_masking import mask_password


SUMMARY_ARTIFACTS = "summary"  # where sweeps.summary logs the study summary on the parent run
PLOTTED_TRIALS = 5


def write_sweep_report(
    parent_run_id: str,
    runs_dir: str | Path = "runs",
    reports_dir: str | Path | None = None,
    log_to_mlflow: bool = True,
    store: RunStore | None = None,
    top: int = 10,
) -> Path:
    """Best trials of a sweep parent run and its study summary; returns the path of report.md."""
    store = store or RunStore(runs_dir)
    parent = store.run(parent_run_id)
    study = parent.data.tags.get(tags.SWEEP_STUDY, parent.info.run_name or parent_run_id)
    out = reports_root(reports_dir) / safe_name(study)
    fresh_dir(out)
    text = render_sweep(parent, store, out, top)
    path = out / REPORT_FILE
    path.write_text(text)
    write_html(path)
    if log_to_mlflow:  # the files, not the summary/ copy: the parent run has the summary once, in summary/
        for item in sorted(out.iterdir()):
            if item.is_file():
                store.client.log_artifact(parent_run_id, str(item), artifact_path=ARTIFACT_PATH)
    return path


def render_sweep(parent: Run, store: RunStore, out: Path, top: int) -> str:
    study = parent.data.tags.get(tags.SWEEP_STUDY, parent.info.run_id)
    metric = parent.data.params.get("sweep.metric", "val/loss")
    direction = parent.data.params.get("sweep.direction", "minimize")
    runs = store.runs_frame(store.children(parent.info.run_id))
    space = [k[len("space."):] for k in parent.data.params if k.startswith("space.")]
    col = f"metrics.{metric}"
    finished = runs[(runs["status"] == "FINISHED")] if not runs.empty else runs
    if col in finished:
        finished = finished.sort_values(col, ascending=direction == "minimize", na_position="last")
    best = finished.head(top).copy()
    best["trial"] = best.get("tags.sweep.trial_number", pd.Series("", index=best.index))
    best["value"] = best[col] if col in best else np.nan
    # The sampled values are tagged per trial (group choices are not config params); older runs fall back.
    chosen = [(f"tags.sweep.param.{k}" if f"tags.sweep.param.{k}" in best else f"params.{k}", k) for k in space]
    columns = [("trial", "trial"), ("value", metric), *chosen, ("run_id", "run id")]
    states = runs.get("tags.sweep.trial_state", pd.Series(dtype=str)).fillna("RUNNING?").value_counts().to_dict()
    lines = [
        f"# Sweep report: `{study}`", "",
        f"Parent run `{parent.info.run_id}` ({parent.info.status}) in `{mask_password(store.client.tracking_uri)}`; objective: "
        f"{direction} `{metric}`; generated {dt.datetime.now().strftime('%Y-%m-%d %H:%M')}.", "",
        "Trial states: " + (", ".join(f"{n} {s.lower()}" for s, n in sorted(states.items())) or "none"), "",
        f"## Best {min(top, len(best))} finished trials", "",
        md.table(best, columns, {col: md.sig3 for col, _ in columns if col not in ("trial", "run_id")}), "",
        "Values to 3 significant digits; `best_trials.csv` has them exact.", "",
        "Trials are single runs (one seed each): a difference between neighbouring trials smaller than the "
        "seed-to-seed noise of the same config is not a ranking.", "",
    ]
    best.to_csv(out / "best_trials.csv", index=False)
    curves = store.curves(best, keys=["val/loss"])
    png = _plot_trials(curves, best, study, metric, out / "best_trials_val_loss.png")
    if png is not None:
        lines += ["## Validation loss of the best trials", "", f"![best trials]({png.name})", ""]
    lines += _embedded_summary(store, parent.info.run_id, out)
    return "\n".join(lines) + "\n"


def _plot_trials(curves: pd.DataFrame, best: pd.DataFrame, study: str, metric: str, path: Path) -> Path | None:
    if curves.empty:
        return None
    fig, axes = plots.new_figure(1, 1)
    ax = axes[0][0]
    drawn = 0
    for i, (_, row) in enumerate(best.head(PLOTTED_TRIALS).iterrows()):
        rows = curves[(curves["run_id"] == row["run_id"]) & (curves["key"] == "val/loss")].sort_values("step")
        if rows.empty:
            continue
        ax.plot(rows["tokens_seen"], rows["value"], marker="o", markersize=3, color=f"C{i}",
                label=f"trial {row['trial']} ({metric} {md.sig3(row['value'])})")
        drawn += 1
    ax.set_xlabel(plots.TOKENS_LABEL)
    ax.set_ylabel("validation loss (nats/token)")
    best_of = f"the {drawn} best trials" if drawn != 1 else "the best trial"
    ax.set_title(f"Sweep {study}: validation loss of {best_of} (one seed each)", fontsize=10)
    ax.legend(fontsize=7)
    return plots.save_figure(fig, path)


def _embedded_summary(store: RunStore, parent_run_id: str, out: Path) -> list[str]:
    """The study summary the sweep logged under `summary/`, copied here with its figures (for the local
    report.md; the HTML report embeds them, and the parent run keeps its one `summary/` copy)."""
    files = store.list_files(parent_run_id, SUMMARY_ARTIFACTS)
    if not files:
        return ["## Study summary", "", "_The parent run has no `summary/` artifacts (the sweep may still be running)._"]
    lines = ["## Study summary", ""]
    for artifact in sorted(files):
        local = store.download_artifact(parent_run_id, artifact)
        name = artifact.rsplit("/", 1)[-1]
        if name == "summary.md":
            text = local.read_text().replace("# Sweep", "### Sweep", 1)
            lines += [text.replace("](", "](summary/"), ""]
        target = out / "summary" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(local, target)
    return lines
