"""Reproduction reports: an ablation (or a sweep) parent run -> report.md + figures + CSVs.

    python -m analysis.report EXP=<preset name | sweep study | parent run id> [runs_dir=runs]
                              [reports_dir=reports] [log=false]
    python -m analysis.report FROM=results/<paper>          # from exported measurements, no MLflow
    python -m analysis.report EXPORT=results/<paper> EXP=<...> [runs_dir=runs]   # export, then report

EXP resolves to the newest parent run tagged `ablation.name=<EXP>`, else the newest sweep parent tagged
`sweep.study=<EXP>`, or a run id. The report (Markdown with tables and figures, a self-contained `report.html`
with the figures embedded, CSVs of every table) is written to `<reports_dir>/<name>/` (reports_dir: argument, else $LLM_REPORTS_DIR, else ./reports) and
logged to the parent run as artifacts under `report/`.

FROM=<folder> rebuilds the report inside an exported results folder from its `data/` files alone
(analysis.results_data), and EXPORT=<folder> writes such a folder from the store first. Both paths render
the same `Ablation` object (analysis.ablation), so a report from the store and one from the CSVs are the
same text. The export keeps each curve thinned (analysis.decimate) and renders from what it kept. In a
results folder, committed whole, `report.html` shows the figures from their files beside it. An exported
folder may hold `provenance.json` (analysis.provenance); the header shows it.

This module is the verb and its entry points; what an ablation's report says is analysis/ablation_report.py,
a sweep's analysis/sweep_report.py, and the parts every report shares analysis/sections.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from analysis import provenance as prov
from analysis.ablation import Ablation
from analysis.ablation_report import render_ablation
from analysis.claims import claim_for
from analysis.exploratory import EXPLORATORY
from analysis.verdict import PRIMARY
from analysis.html_report import write_html
from analysis.load_runs import RunNotFound, RunStore
from analysis.results_data import ResultsDataError, exported, read_results_data, write_results_data
from analysis.results_data import safe_name as _safe
from analysis.sections import ARTIFACT_PATH, REPORT_FILE, fresh_dir, reports_root
from analysis.store_ablation import load_ablation
from analysis.sweep_report import write_sweep_report
from lit_modules.config.arguments import FLAG, Arg, Verb, parse_words
from lit_modules.config.errors import ConfigError
from lit_modules.runs import tags
from lit_modules.tracking.store import resolve_tracking_uri


def write_report(
    parent_run_id: str,
    runs_dir: str | Path = "runs",
    reports_dir: str | Path | None = None,
    log_to_mlflow: bool = True,
    store: RunStore | None = None,
) -> Path:
    """Write the report of an ablation (or sweep) parent run; returns the path of report.md."""
    store = store or RunStore(runs_dir)
    parent = store.run(parent_run_id)
    if parent.data.tags.get(tags.SWEEP_ROLE) == tags.PARENT_ROLE:
        return write_sweep_report(parent_run_id, runs_dir, reports_dir, log_to_mlflow, store)
    ab = load_ablation(store, parent)
    path = render_report(ab, reports_root(reports_dir) / _safe(ab.name), embed_figures=True)
    if log_to_mlflow:
        store.client.log_artifacts(parent_run_id, str(path.parent), artifact_path=ARTIFACT_PATH)
    return path


def export_results(parent_run_id: str, folder: str | Path, runs_dir: str | Path = "runs",
                   store: RunStore | None = None, provenance: dict | None = None) -> Path:
    """A finished ablation -> `<folder>/data/` (its measurements), `<folder>/provenance.json` (when given,
    see analysis.provenance.provenance_record) and the report rendered there; returns report.md's path."""
    store = store or RunStore(runs_dir)
    parent = store.run(parent_run_id)
    if parent.data.tags.get(tags.SWEEP_ROLE) == tags.PARENT_ROLE:
        raise ValueError(f"Run {parent_run_id} is a sweep parent; only ablations are exported.")
    ab = exported(load_ablation(store, parent))  # the report reads what data/ keeps, as FROM= will
    folder = Path(folder)
    write_results_data(ab, folder)
    if provenance is not None:
        prov.write_provenance(folder, provenance)
    return render_report(ab, folder, prov.read_provenance(folder))


def report_from_results(folder: str | Path) -> Path:
    """Regenerate `<folder>/report.md` (+ figures and CSV tables) from `<folder>/data/` alone."""
    folder = Path(folder)
    ab = read_results_data(folder)
    return render_report(ab, folder, prov.read_provenance(folder))


def render_report(ab: Ablation, out: Path, provenance: dict | None = None, embed_figures: bool = False) -> Path:
    """Render an Ablation into `out` (report.md, figures, CSV tables); never touches a store.

    report.html names its figures beside it (a results folder is committed whole); `embed_figures` puts them
    inside it, for MLflow's artifact view, which shows one file alone."""
    out = Path(out)
    fresh_dir(out)
    path = out / REPORT_FILE
    path.write_text(render_ablation(ab, claim_for(ab.claim_key), out, provenance))
    write_html(path, embed=embed_figures)
    return path


def report_for(exp: str, runs_dir: str | Path = "runs", reports_dir: str | Path | None = None,
               log_to_mlflow: bool = True) -> Path:
    """The report of the newest parent run named `exp` (ablation name, sweep study or run id)."""
    store = RunStore(runs_dir)
    parent = store.resolve(exp)
    return write_report(parent.info.run_id, runs_dir, reports_dir, log_to_mlflow, store)


VERB = Verb(
    "report",
    {"exp": Arg(), "from": Arg(), "export": Arg(), "runs_dir": Arg(default="runs"), "reports_dir": Arg(),
     "log": Arg(FLAG, default=True)},
    case_insensitive=True,  # EXP= as the Makefile writes it, exp= as Python users do
)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_words(sys.argv[1:] if argv is None else argv, VERB).values
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args["from"] is not None and (args["exp"] or args["export"]):
        print("error: FROM=<results folder> reads exported files only; give it without EXP= or EXPORT=",
              file=sys.stderr)
        return 2
    try:
        if args["from"] is not None:
            if not args["from"]:
                print("error: FROM= names no folder; give FROM=results/<paper>", file=sys.stderr)
                return 2
            path = report_from_results(args["from"])
        elif not args["exp"]:
            print("error: name the experiment: EXP=<preset name | sweep study | parent run id>", file=sys.stderr)
            return 2
        elif (missing := missing_local_store(args["runs_dir"])) is not None:
            print(f"error: EXP={args['exp']}: nothing named '{args['exp']}' can have run here: there is no MLflow "
                  f"store at {missing} (give runs_dir=<the folder your runs went to>)", file=sys.stderr)
            return 2
        elif args["export"]:
            store = RunStore(args["runs_dir"])
            path = export_results(store.resolve(args["exp"]).info.run_id, args["export"], store=store)
        else:
            path = report_for(args["exp"], args["runs_dir"], args["reports_dir"], log_to_mlflow=args["log"])
    except (RunNotFound, ResultsDataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    for line in exploratory_lines(Path(path).parent):
        print(line)
    return 0


def missing_local_store(runs_dir: str) -> Path | None:
    """The local default store's database when it does not exist (nothing is created to find that out)."""
    uri = resolve_tracking_uri(None, runs_dir)
    database = Path(runs_dir).resolve() / "mlflow.db"
    return database if uri == f"sqlite:///{database}" and not database.is_file() else None


def exploratory_lines(folder: Path) -> list[str]:
    """The console's word on a report whose primary checks are exploratory (analysis/exploratory.py)."""
    table = folder / "verdicts.csv"
    if not table.is_file():
        return []
    rows = pd.read_csv(table, keep_default_na=False)
    if EXPLORATORY not in rows:
        return []
    return [f"exploratory: `{r['arm']}` on `{r['metric']}`: {r[EXPLORATORY]}"
            for _, r in rows[(rows["role"] == PRIMARY) & (rows[EXPLORATORY] != "")].iterrows()]


if __name__ == "__main__":
    sys.exit(main())
