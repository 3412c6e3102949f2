"""Reproduction reports: an ablation (or a sweep) parent run -> report.md + figures + CSVs.

    python -m analysis.report EXP=<preset name | sweep study | parent run id> [runs_dir=runs]
                              [reports_dir=reports] [log=false]
    python -m analysis.report FROM=results/<paper>          # from exported measurements, no MLflow
    python -m analysis.report EXPORT=results/<paper> EXP=<...> [runs_dir=runs]   # export, then report

EXP resolves to the newest parent run tagged `ablation.name=<EXP>`, else the newest sweep parent tagged
`sweep.study=<EXP>`, or a run id. The report (Markdown with tables and figures, CSVs of every table) is
written to `<reports_dir>/<name>/` (reports_dir: argument, else $LLM_REPORTS_DIR, else ./reports) and
logged to the parent run as artifacts under `report/`.

FROM=<folder> rebuilds the report inside an exported results folder from its `data/` files alone
(analysis.results_data), and EXPORT=<folder> writes such a folder from the store first. Both paths render
the same `Ablation` object (analysis.ablation), so a report from the store and one from the CSVs are the
same text. An exported folder may hold `provenance.json` (analysis.provenance); the header shows it.

For an ablation it states the paper's claim (analysis/claims.py), the scale of every arm (parameters,
tokens, tokens per parameter, seeds), what the runs measured (paired-seed differences with bootstrap CIs,
t and sign-flip tests, the reference's seed sd and MDD, tokens to reach the reference's final loss,
wall-time overhead), a verdict per arm and check under the explicit rule, and the figures whose data
exist. For a sweep: the best trials and the study summary of sweeps/summary.py.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from mlflow.entities import Run

from analysis import markdown as md
from analysis import plots
from analysis import provenance as prov
from analysis.ablation import (
    TRAIN_TAIL,
    Ablation,
    arm_summary_table,
    effects_table,
    eval_metrics,
    overhead_table,
    reference_of,
    scale_table,
    seed_key,
    seed_noise_table,
    speedups_table,
    verdicts_table,
)
from analysis.claims import MATCHED_TPP, RULE_TEXT, Claim, claim_for, count, number, split_arm
from analysis.load_runs import RunNotFound, RunStore, numeric
from analysis.results_data import DATA_DIR, ResultsDataError, read_results_data, write_results_data
from analysis.results_data import safe_name as _safe
from analysis.store_ablation import load_ablation
from lit_modules.tracking.uri_masking import mask_password

REPORTS_ENV = "LLM_REPORTS_DIR"
REPORT_FILE = "report.md"
ARTIFACT_PATH = "report"


def reports_root(reports_dir: str | Path | None = None) -> Path:
    return Path(reports_dir or os.environ.get(REPORTS_ENV) or "reports")


@dataclass
class Section:
    title: str
    body: list[str] = field(default_factory=list)

    def render(self) -> str:
        return "\n".join([f"## {self.title}", "", *self.body, ""])


# ---------------------------------------------------------------------------------------- entry points


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
    if parent.data.tags.get("sweep.role") == "parent":
        return write_sweep_report(parent_run_id, runs_dir, reports_dir, log_to_mlflow, store)
    ab = load_ablation(store, parent)
    path = render_report(ab, reports_root(reports_dir) / _safe(ab.name))
    if log_to_mlflow:
        store.client.log_artifacts(parent_run_id, str(path.parent), artifact_path=ARTIFACT_PATH)
    return path


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
    study = parent.data.tags.get("sweep.study", parent.info.run_name or parent_run_id)
    out = reports_root(reports_dir) / _safe(study)
    _fresh_dir(out)
    text = render_sweep(parent, store, out, top)
    path = out / REPORT_FILE
    path.write_text(text)
    if log_to_mlflow:
        store.client.log_artifacts(parent_run_id, str(out), artifact_path=ARTIFACT_PATH)
    return path


def export_results(parent_run_id: str, folder: str | Path, runs_dir: str | Path = "runs",
                   store: RunStore | None = None, provenance: dict | None = None) -> Path:
    """A finished ablation -> `<folder>/data/` (its measurements), `<folder>/provenance.json` (when given,
    see analysis.provenance.provenance_record) and the report rendered there; returns report.md's path."""
    store = store or RunStore(runs_dir)
    parent = store.run(parent_run_id)
    if parent.data.tags.get("sweep.role") == "parent":
        raise ValueError(f"Run {parent_run_id} is a sweep parent; only ablations are exported.")
    ab = load_ablation(store, parent)
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


def render_report(ab: Ablation, out: Path, provenance: dict | None = None) -> Path:
    """Render an Ablation into `out` (report.md, figures, CSV tables); never touches a store."""
    out = Path(out)
    _fresh_dir(out)
    path = out / REPORT_FILE
    path.write_text(render_ablation(ab, claim_for(ab.claim_key), out, provenance))
    return path


def report_for(exp: str, runs_dir: str | Path = "runs", reports_dir: str | Path | None = None,
               log_to_mlflow: bool = True) -> Path:
    """The report of the newest parent run named `exp` (ablation name, sweep study or run id)."""
    store = RunStore(runs_dir)
    parent = store.resolve(exp)
    return write_report(parent.info.run_id, runs_dir, reports_dir, log_to_mlflow, store)


USAGE = ("EXP=<name|run id> [runs_dir=...] [reports_dir=...] [log=false], or FROM=<results folder>, or "
         "EXPORT=<results folder> EXP=<name|run id> [runs_dir=...]")


def main(argv: list[str] | None = None) -> int:
    args = {"exp": None, "from": None, "export": None, "runs_dir": "runs", "reports_dir": None, "log": "true"}
    for arg in sys.argv[1:] if argv is None else argv:
        key, sep, value = arg.partition("=")
        key = key.lower().lstrip("-")
        if not sep or key not in args:
            print(f"error: expected {USAGE}, got '{arg}'", file=sys.stderr)
            return 2
        args[key] = value
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
        elif args["export"]:
            store = RunStore(args["runs_dir"])
            path = export_results(store.resolve(args["exp"]).info.run_id, args["export"], store=store)
        else:
            path = report_for(args["exp"], args["runs_dir"], args["reports_dir"],
                              log_to_mlflow=args["log"].lower() not in ("false", "0", "no"))
    except (RunNotFound, ResultsDataError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    return 0


# ---------------------------------------------------------------------------------------- ablation report


def render_ablation(ab: Ablation, claim: Claim, out: Path, provenance: dict | None = None) -> str:
    verdicts = verdicts_table(ab, claim)
    metrics = ["val/loss", "val/bits_per_byte", *eval_metrics(ab)]
    metrics = [m for m in metrics if f"metrics.{m}" in ab.finished]
    effects = effects_table(ab, claim, metrics)
    noise = seed_noise_table(ab, claim, metrics)
    speed = speedups_table(ab, claim)
    cost = overhead_table(ab, claim)
    scale = scale_table(ab, claim)
    checked = [c.metric for c in claim.checks if c.metric != "speedup" and c.metric not in metrics]
    summary = arm_summary_table(ab, [*metrics, *dict.fromkeys(checked)])
    for name, frame in (("verdicts", verdicts), ("effects", effects), ("arm_summary", summary), ("seed_noise", noise),
                        ("speedup", speed), ("overhead", cost), ("scale", scale), ("runs", _runs_listing(ab))):
        if not frame.empty:
            frame.to_csv(out / f"{name}.csv", index=False)

    sections = [
        _header(ab, claim, scale, provenance),
        _claim_section(claim),
        _measured_section(ab, claim),
        _verdict_section(verdicts),
        _arm_summary_section(summary),
        _effects_section(effects, metrics),
        _noise_section(noise),
        _speedup_section(speed),
        _overhead_section(cost),
        _figures_section(ab, effects, out),
        _token_gap_section(ab, out),
        _sv_hist_section(ab, out),
        _runs_section(ab),
        _method_section(),
    ]
    return "\n".join([f"# Reproduction report: `{ab.name}`", ""] + [s.render() for s in sections if s is not None and s.body])


def _header(ab: Ablation, claim: Claim, scale: pd.DataFrame, provenance: dict | None) -> Section:
    parent = ab.parent
    body = [f"Parent run `{parent.run_id}` ({parent.status}), measurements read from `{parent.source}`; claim "
            f"`{claim.preset}`. The same report is made from the MLflow store (`EXP=`) and from an exported "
            f"results folder's `{DATA_DIR}/` files (`python -m analysis.report FROM=<folder>`)." if parent else
            "No parent run record."]
    if provenance:
        body += ["", f"**Provenance:** {prov.describe(provenance)}."]
    body += ["", f"**Scale** (per arm: medians over its finished runs; TPP = tokens per non-embedding parameter; "
                 f"matched scale needs >= {MATCHED_TPP:g} TPP, or the paper's own TPP where lower). Paper: "
                 f"{claim.paper_scale}; {claim.paper_tpp_note}.", ""]
    body.append(md.table(scale, [
        ("arm", "arm"), ("variant", "variant"), ("params_total", "parameters"),
        ("params_non_embedding", "non-embedding"), ("tokens", "tokens"), ("tpp", "TPP"),
        ("paper_tpp", "paper TPP"), ("matched", "matched scale"), ("seeds", "seeds"),
    ], {"params_total": count, "params_non_embedding": count, "tokens": count, "tpp": number, "paper_tpp": number}))
    return Section("Scale and provenance", body)
def _claim_section(claim: Claim) -> Section:
    checks = []
    for c in claim.checks:
        line = f"- `{c.metric}` ({c.better} is better{', each side at its best LR' if c.tuned else ''}): {c.paper}"
        checks.append(line + (f" Paper effect in our units: {c.assumption}." if c.assumption else ""))
    return Section("The paper's claim", [
        f"**Paper:** {claim.paper}", "", claim.statement, "",
        f"**Paper's scale:** {claim.paper_scale}; {count(claim.paper_tokens) if claim.paper_tokens else 'unknown'} "
        f"training tokens; {claim.paper_tpp_note}.", "", "**Checks made here:**", "", *checks,
    ])


def _measured_section(ab: Ablation, claim: Claim) -> Section:
    f = ab.finished
    tokens = ab.total_tokens()
    body = []
    if f.empty:
        return Section("What this run measured", ["_No child run finished: nothing to measure._",
                                                  "", _status_counts(ab)])
    model = _first(f, "params.model.name")
    params = numeric(f.get("params.budget.params_non_embedding", pd.Series(dtype=float))).median()
    steps = numeric(f.get("params.budget.steps", pd.Series(dtype=float))).median()
    body.append(f"- Model `{model}`, {md.fmt(float(params))} non-embedding parameters; "
                f"{md.fmt(float(steps))} optimizer steps = {md.fmt(tokens)} training tokens per run (medians "
                "over the finished runs; the scale table above has every arm's).")
    if len(ab.variants()) > 1:
        body.append("- Variants (model rungs or sweep points; each arm is compared within its own variant): "
                    + ", ".join(f"`{v or '-'}`" for v in ab.variants()) + ".")
    body.append(f"- Arms (grouped by variant, reference first): {', '.join(f'`{a}`' for a in ab.arms)}; "
                f"baseline `{ab.baseline}`.")
    refs = {a: reference_of(ab, claim, a) for a in ab.arms}
    other = {a: r for a, r in refs.items() if a != r and split_arm(r)[0] != split_arm(ab.baseline)[0]}
    if other:
        body.append("- Arms compared with a reference other than the baseline: "
                    + ", ".join(f"`{a}` vs `{r}`" for a, r in other.items()) + ".")
    body.append(f"- Seeds (finished runs per arm): "
                + ", ".join(f"`{a}`: {','.join(sorted(ab.run_ids(a), key=seed_key)) or 'none'}" for a in ab.arms) + ".")
    body.append(f"- {_status_counts(ab)}")
    commits = sorted(set(f.get("tags.git_commit", pd.Series(dtype=str)).dropna()))
    dirty = (f.get("tags.git_dirty", pd.Series(dtype=str)) == "true").any()
    if commits:
        body.append(f"- Code: commit(s) {', '.join(c[:10] for c in commits)}"
                    + (" with uncommitted changes (each run logged its diff under run/)." if dirty else "."))
    threads = sorted(set(f.get("params.trainer.num_threads", pd.Series(dtype=str)).dropna())
                     | set(f.get("tags.hw.cpu_threads", pd.Series(dtype=str)).dropna()))
    if threads:
        body.append(f"- Threads per run (trainer.num_threads or torch's count): {', '.join(threads)}.")
    return Section("What this run measured", body)


def _status_counts(ab: Ablation) -> str:
    counts = ab.runs.groupby("status").size().to_dict() if not ab.runs.empty else {}
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no child runs"
    return f"Child runs: {text} (only FINISHED runs enter the statistics)."


def _verdict_section(verdicts: pd.DataFrame) -> Section:
    body = [f"**Rule.** {RULE_TEXT}", ""]
    if verdicts.empty:
        body.append("_No check applies to these arms._")
        return Section("Verdicts", body)
    m = int(verdicts["family_size"].iloc[0])
    body += [f"Family-wise error: the {m} tests with an expectation and at least the rule's seeds are "
             "Holm-adjusted together (`p (Holm)`); context arms and too-few-seed rows are not tests.", ""]
    for _, v in verdicts.iterrows():
        line = (f"- Verdict: `{v['arm']}` vs `{v['reference']}` on `{v['metric']}`: **{v['verdict']}** "
                f"({v['reason']}).")
        if v["selection"]:
            line += f" Tuned: {v['selection']}."
        body.append(line)
    body += ["", md.table(verdicts, [
        ("arm", "arm"), ("reference", "reference"), ("variant", "variant"), ("metric", "check"),
        ("expect", "paper expects"), ("n", "seeds"), ("diff", "mean diff"), ("ci_low", "CI low"),
        ("ci_high", "CI high"), ("paper_effect", "paper effect"), ("p_t", "p (t)"), ("p_holm", "p (Holm)"),
        ("p_sign_flip", "p (sign-flip)"), ("seed_sd", "seed sd"), ("tpp", "TPP"), ("matched", "matched"),
        ("verdict", "verdict"),
    ], {"diff": md.signed, "ci_low": md.signed, "ci_high": md.signed, "paper_effect": md.signed, "p_t": md.pvalue,
        "p_holm": md.pvalue, "p_sign_flip": md.pvalue, "tpp": number})]
    if (verdicts["metric"] == "speedup").any():
        body += ["", "For `speedup` the difference is the mean over seeds of ln(reference tokens / arm tokens): "
                 "0 means no speedup, ln 2 = 0.693 means 2x; the paper effect is ln of its speedup."]
    return Section("Verdicts", body)


def _arm_summary_section(summary: pd.DataFrame) -> Section:
    if summary.empty:
        return Section("Per arm", [])
    body = ["Every arm on its own: final values, mean and sample standard deviation over its finished seeds "
            "(sd needs 2 seeds), with the smallest and largest seed. The train loss is the mean of the last "
            f"{TRAIN_TAIL} logged `train/loss` values of a run (each one micro-batch).", ""]
    body.append(md.table(summary, [("metric", "metric"), ("arm", "arm"), ("n", "seeds"), ("mean", "mean"),
                                   ("sd", "sd"), ("min", "min"), ("max", "max")]))
    return Section("Per arm: mean ± sd over seeds", body)


def _effects_section(effects: pd.DataFrame, metrics: list[str]) -> Section:
    body = ["Each arm minus its reference on the final value, paired by seed; CI = 95% paired bootstrap over "
            "seeds; p (t) = paired t-test (raw: not adjusted, this table gives no verdicts); p (sign-flip) = "
            "permutation test (exact when marked). Null results are listed like any other.", ""]
    if effects.empty:
        body.append("_No arm has paired finished seeds with its reference._")
        return Section("Final metrics: arm - reference", body)
    body.append(md.table(effects, [
        ("metric", "metric"), ("better", "better"), ("arm", "arm"), ("reference", "reference"), ("n", "seeds"),
        ("mean_ref", "reference mean"), ("mean_arm", "arm mean"), ("diff", "diff"), ("rel_diff", "relative"),
        ("ci_low", "CI low"), ("ci_high", "CI high"), ("p_t", "p (t)"), ("p_sign_flip", "p (sign-flip)"),
        ("exact", "exact"),
    ], {"diff": md.signed, "ci_low": md.signed, "ci_high": md.signed, "p_t": md.pvalue,
        "p_sign_flip": md.pvalue, "rel_diff": lambda x: f"{x:+.2%}" if isinstance(x, float) and math.isfinite(x) else "–"}))
    return Section("Final metrics: arm - reference", body)


def _noise_section(noise: pd.DataFrame) -> Section:
    body = ["Two different numbers, per reference arm: the *seed sd* is the seed-to-seed standard deviation of "
            "its final values (rule 3's threshold); the *MDD* (minimum detectable difference) is the paired "
            "mean difference these seeds would detect with 80% power at the 5% level, taking the spread of a "
            "per-seed difference as sqrt(2) x seed sd (conservative: pairing usually removes more). The rule "
            "does not use the MDD.", ""]
    body.append(md.table(noise, [("metric", "metric"), ("reference", "reference"), ("n", "seeds"),
                                 ("mean", "mean"), ("seed_sd", "seed sd"), ("mdd", "MDD")]))
    return Section("Seed noise of the references: seed sd and MDD", body)


def _speedup_section(speed: pd.DataFrame) -> Section:
    if speed.empty:
        return Section("Token efficiency", [])
    body = ["Tokens each arm needs to reach its paired reference seed's final val/loss (linear interpolation "
            "between evaluations; `never` = not reached within the budget), mean over seeds; speedup = "
            "reference tokens / arm tokens.", ""]
    body.append(md.table(speed, [
        ("arm", "arm"), ("reference", "reference"), ("n", "seeds"), ("ref_tokens", "reference tokens"),
        ("arm_tokens", "arm tokens"), ("speedup", "speedup"), ("per_seed", "per seed"), ("summary", "summary"),
    ]))
    return Section("Token efficiency: tokens to reach the reference's final val/loss", body)


def _overhead_section(cost: pd.DataFrame) -> Section:
    if cost.empty or not np.isfinite(cost["us_per_token"].to_numpy(dtype=float)).any():
        return Section("Overhead", [])
    body = ["Wall time per training token: median of the run's `perf/tokens_per_s` logs (the first, warm-up "
            "one left out); ratio = geometric mean over seeds of arm / reference. Runs sharing a busy machine "
            "make this noisy; compare it with the spread between seeds.", ""]
    body.append(md.table(cost, [("arm", "arm"), ("reference", "reference"), ("n", "paired seeds"),
                                ("us_per_token", "µs per token"), ("ratio", "time ratio"),
                                ("ratio_min", "min"), ("ratio_max", "max")]))
    return Section("Overhead: wall time per token", body)


def _figures_section(ab: Ablation, effects: pd.DataFrame, out: Path) -> Section:
    made: list[tuple[str, Path | None]] = [
        ("Validation and training loss against tokens seen, per arm.", plots.plot_loss_curves(ab, out / "loss_vs_tokens.png")),
        ("Final val/loss difference per arm with its 95% CI and the reference's seed sd.",
         plots.plot_effects(effects, "val/loss", out / "effects_val_loss.png",
                            f"{ab.name}: final val/loss, arm - reference (paired by seed)")),
        ("GMCN over training (PC layer).", plots.plot_gmcn(ab, out / "gmcn.png")),
        ("Final GMCN per matrix kind (PC layer).", plots.plot_gmcn_by_kind(ab, out / "gmcn_by_kind.png")),
        ("MoLS per-group SNR and learning-rate multipliers.", plots.plot_mols(ab, out / "mols_snr_alpha.png")),
        ("MoLS learning-rate multipliers applied over training.", plots.plot_mols_scales(ab, out / "mols_lr_scale.png")),
        ("Initial weight std by matrix, measured at step 0.", plots.plot_init_std(ab, out / "init_std.png")),
        ("Condensation trajectory (small init).", plots.plot_condensation(ab, out / "condensation.png")),
        ("Stable rank trajectory.", plots.plot_stable_rank(ab, out / "stable_rank.png")),
        ("Attention sink over training (small init).", plots.plot_attention_sink(ab, out / "attention_sink.png")),
        ("WISCA norm ratios and scales over training.", plots.plot_wisca(ab, out / "wisca_ratios.png")),
        ("Pseudo-rank and post-fine-tune score against weight decay, per regime.",
         plots.plot_vs_lambda(ab, {"attention pseudo-rank (final)": "diag/*pseudo_rank*",
                                   "post-fine-tune accuracy (mean over tasks)": "finetune:eval/*/acc",
                                   "final val/loss (nats/token)": "val/loss"}, out / "vs_weight_decay.png")
         if _has_pseudo_rank_or_finetune(ab) else None),
    ]
    body = []
    for caption, path in made:
        if path is not None:
            body += [f"**{caption}**", "", f"![{caption}]({path.name})", ""]
    return Section("Figures", body)


def _has_pseudo_rank_or_finetune(ab: Ablation) -> bool:
    return (any("pseudo_rank" in c for c in ab.finished.columns) or not ab.finetunes.empty)


def _token_gap_section(ab: Ablation, out: Path) -> Section:
    """Per arm, the token-gap table computed when the ablation was read (analysis.store_ablation)."""
    from analysis.token_gap import COLUMNS, plot_token_gap

    body = []
    gaps = ab.token_gaps
    for arm in [a for a in ab.arms if a in set(gaps["arm"])] if not gaps.empty else []:
        df = gaps[gaps["arm"] == arm]
        first = df.iloc[0]
        reference, seed = first["reference"], first["seed"]
        if first["note"]:
            body.append(f"- `{arm}` vs `{reference}`, seed {seed}: not compared ({first['note']})")
            continue
        table = df[list(COLUMNS)].reset_index(drop=True)
        stem = f"token_gap_{_safe(arm)}"
        table.to_csv(out / f"{stem}.csv", index=False)
        png = plot_token_gap(table, out / f"{stem}.png", title=f"{arm} (S) vs {reference} (B), seed {seed}")
        overall = table[table["bin"] == "all"].iloc[0]
        body += [f"**`{arm}` vs `{reference}`, seed {seed}** ({int(overall['count']):,} tokens; mean Δ = "
                 f"{overall['mean_delta']:+.4f}, 95% CI [{overall['ci_low']:+.4f}, {overall['ci_high']:+.4f}])", "",
                 f"![token gap {arm}]({png.name})", ""]
    if body:
        body.insert(0, "Δ = p_arm − p_reference of the true next token, binned by the two runs' average loss "
                       "(our proposal; the paper's Δ_sym is UNCONFIRMED). One seed per arm; tokens are "
                       "correlated, so the token-bootstrap CIs are too narrow: compare across seeds first.\n")
    return Section("Token-level gap by difficulty", body)


def _sv_hist_section(ab: Ablation, out: Path) -> Section:
    """The runs' own singular-value histograms (diagnostic `sv_hist`), last step, first seed per arm."""
    body = []
    for h in ab.sv_hists:
        target = out / f"sv_hist_{_safe(h.arm)}.png"
        target.write_bytes(h.png)
        body += [f"**`{h.arm}`, seed {h.seed}, `{h.artifact}`**", "", f"![sv hist {h.arm}]({target.name})", ""]
    return Section("Singular-value histograms (from the runs' `sv_hist` diagnostic)", body)


def _runs_listing(ab: Ablation) -> pd.DataFrame:
    if ab.runs.empty:
        return pd.DataFrame()
    frame = ab.runs.assign(
        val_loss=ab.runs.get("metrics.val/loss", pd.Series(np.nan, index=ab.runs.index)),
        end_reason=ab.runs.get("tags.end_reason", pd.Series("", index=ab.runs.index)),
        counted=ab.runs["run_id"].isin(ab.finished["run_id"]),
    )
    order = {a: i for i, a in enumerate(ab.arms)}
    frame = frame.assign(_o=frame["arm"].map(order), _s=frame["seed"].map(seed_key))
    frame = frame.sort_values(["_o", "_s", "start_time"], kind="stable")
    return frame[["arm", "seed", "status", "counted", "val_loss", "run_id", "end_reason"]]


def _runs_section(ab: Ablation) -> Section:
    return Section("Runs", [md.table(_runs_listing(ab), [
        ("arm", "arm"), ("seed", "seed"), ("status", "status"), ("counted", "counted"),
        ("val_loss", "final val/loss"), ("run_id", "run id"), ("end_reason", "end reason"),
    ])])


def _method_section() -> Section:
    return Section("Method", [
        "- Pairing: runs of different arms with the same seed share data order and initial draw; statistics "
        "use the per-seed differences (arm - reference).",
        "- Bootstrap: 10,000 resamples of the seeds with replacement, percentile 95% interval, fixed RNG seed.",
        "- Sign-flip test: all 2^n sign patterns of the differences for n <= 16 (exact), Monte Carlo above.",
        "- Multiplicity: Holm's step-down adjustment over the report's (arm x check) tests.",
        "- Step convention: a metric at step k was measured after optimizer step k (0-based); tokens seen = "
        "(k + 1) x tokens per step.",
        "- Tables are also saved as CSV next to this file; every curve is in the MLflow store (`make mlflow-ui`) "
        f"and, in an exported results folder, in `{DATA_DIR}/curves.csv`.",
    ])


# ---------------------------------------------------------------------------------------- sweep report


def render_sweep(parent: Run, store: RunStore, out: Path, top: int) -> str:
    study = parent.data.tags.get("sweep.study", parent.info.run_id)
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
        md.table(best, columns), "",
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
    fig, axes = plots._figure(1, 1)
    ax = axes[0][0]
    for i, (_, row) in enumerate(best.head(5).iterrows()):
        rows = curves[(curves["run_id"] == row["run_id"]) & (curves["key"] == "val/loss")].sort_values("step")
        if rows.empty:
            continue
        ax.plot(rows["tokens_seen"], rows["value"], marker="o", markersize=3, color=f"C{i}",
                label=f"trial {row['trial']} ({metric} {md.fmt(row['value'])})")
    ax.set_xlabel(plots.TOKENS_LABEL)
    ax.set_ylabel("validation loss (nats/token)")
    ax.set_title(f"Sweep {study}: validation loss of the 5 best trials (one seed each)", fontsize=10)
    ax.legend(fontsize=7)
    return plots._save(fig, path)


def _embedded_summary(store: RunStore, parent_run_id: str, out: Path) -> list[str]:
    """The study summary sweeps/summary.py logged under `summary/`, copied here with its figures."""
    files = store.list_files(parent_run_id, "summary")
    if not files:
        return ["## Study summary", "", "_The parent run has no `summary/` artifacts (the sweep may still be running)._"]
    lines = ["## Study summary (sweeps/summary.py)", ""]
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


# ---------------------------------------------------------------------------------------- helpers


def _fresh_dir(path: Path) -> None:
    """The report folder holds one report: files of an older one (a plot no longer drawn) are removed."""
    if path.is_dir():
        for child in path.iterdir():
            if child.is_file() and child.suffix in (".md", ".png", ".csv"):
                child.unlink()
        if (path / "summary").is_dir():
            shutil.rmtree(path / "summary")
    path.mkdir(parents=True, exist_ok=True)


def _first(frame: pd.DataFrame, col: str) -> str:
    if col not in frame or frame[col].dropna().empty:
        return "?"
    return str(frame[col].dropna().iloc[0])


if __name__ == "__main__":
    sys.exit(main())
