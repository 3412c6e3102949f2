"""An ablation's reproduction report, rendered from an `Ablation` (never from the store): report.md, its
figures and a CSV of every table, in one folder.

It states the paper's claim (analysis/claims.py), the scale of every arm (parameters, tokens, tokens per
parameter, seeds), what the runs measured (paired-seed differences with Student-t intervals, t and sign-flip
tests, the reference's seed sd and MDD, tokens to reach the reference's final loss, wall-time overhead), a
verdict per arm and check under the explicit rule (analysis/verdict.py), the learning rate each tuned arm
got (analysis/lr_tuning_report.py), each primary check's trend over model sizes (analysis/trend_report.py),
the figures whose data exist (the core ones and those each technique declares in its report.yaml) and, when
the grid's runs were fine-tuned, the plasticity table (analysis/plasticity.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import markdown as md
from analysis import declared_figures, plots
from analysis import provenance as prov
from analysis.ablation import TRAIN_TAIL, Ablation, eval_metrics, scale_table
from analysis.comparisons import (
    arm_summary_table, effects_table, overhead_table, reference_of, seed_noise_table, speedups_table,
)
from analysis.exploratory import EXPLORATORY, gated, ledger_gate
from analysis.families import Families, families_for
from analysis.finetune_lr_tuning import as_compared
from analysis.forest import FOREST_FILE, plot_forest
from analysis.verdict_table import verdicts_table
from analysis.claims import Claim, split_arm
from analysis.load_runs import numeric
from analysis.lr_tuning_report import lr_tuning_section
from analysis.plasticity import plasticity_tables, table_lines
from analysis.results_data import DATA_DIR
from analysis.results_data import safe_name as _safe
from analysis.seeds import seed_key
from analysis.sections import Section, first_value
from lit_modules.technique_reports import figure_specs
from analysis.scale import MATCHED_TPP, count, number
from analysis.prediction import prediction_section
from analysis.trend_report import trend_section
from analysis.verdict import PRIMARY, RULE_TEXT


def render_ablation(ab: Ablation, claim: Claim, out: Path, provenance: dict | None = None) -> str:
    ran = ab  # every fine-tune: the learning-rate section says which rates the test bases' fine-tunes ran at
    ab = as_compared(ab, provenance)
    families = families_for(ab.name)
    verdicts = gated(verdicts_table(ab, claim, families), ran, provenance)
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
        lr_tuning_section(ran, provenance, out),
        _verdict_section(verdicts, families, provenance),
        trend_section(ab, verdicts, out),
        prediction_section(verdicts, out),
        _arm_summary_section(summary),
        _effects_section(effects, metrics),
        _noise_section(noise),
        _speedup_section(speed),
        _overhead_section(cost),
        _figures_section(ab, effects, verdicts, out),
        _plasticity_section(ab, out),
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
    body = []
    if f.empty:
        return Section("What this run measured", ["_No child run finished: nothing to measure._",
                                                  "", _status_counts(ab)])
    # With several variants (rungs, rates) a median over every run would mix sizes: the baseline arm's runs,
    # else those of the arms without a variant (the headline rung).
    src, of = f, "the finished runs"
    if len(ab.variants()) > 1:
        base, plain = f[f["arm"] == ab.baseline], f[f["arm"].map(lambda a: split_arm(a)[1] == "")]
        if not base.empty:
            src, of = base, f"the baseline arm `{ab.baseline}`"
        elif not plain.empty:
            src, of = plain, "the arms without a variant"
    model = first_value(src, "params.model.name")
    params = numeric(src.get("params.budget.params_non_embedding", pd.Series(dtype=float))).median()
    steps = numeric(src.get("params.budget.steps", pd.Series(dtype=float))).median()
    tokens = numeric(src.get("params.budget.total_tokens", pd.Series(dtype=float))).median()
    body.append(f"- Model `{model}`, {md.fmt(float(params))} non-embedding parameters; "
                f"{md.fmt(float(steps))} optimizer steps = {md.fmt(float(tokens))} training tokens per run (medians "
                f"over {of}; the scale table above has every arm's).")
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
    body.append("- Seeds (finished runs per arm): "
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


def _verdict_section(verdicts: pd.DataFrame, families: Families, provenance: dict | None) -> Section:
    body = [f"**Rule.** {RULE_TEXT}", ""]
    kept_out = ledger_gate(verdicts)
    if kept_out:
        body += ["**Exploratory protocol: not in the ledger** until its primary checks pass the gates the shipped "
                 "protocols pass (analysis/exploratory.py): " + "; ".join(kept_out) + ".", ""]
    if verdicts.empty:
        body.append("_No check applies to these arms._")
        return Section("Verdicts", body)
    primary = verdicts[verdicts["role"] == PRIMARY]
    m = int(primary["family_size"].max()) if not primary.empty else 0
    if not families.declared:
        body += [f"No protocol declares this claim's families, so every test with an expectation is primary: "
                 f"one Holm family of {m} tests.", ""]
    else:
        body += [f"Families declared in `{families.source}`: {m} primary test(s) Holm-adjusted together; the "
                 "rest are secondary (raw p, 95% interval).", ""]
        if not (provenance or {}).get("checks_sha256"):
            body += ["_These families were declared after these data were exported (the provenance has no "
                     "`checks_sha256`): the split into primary and secondary was made with the data seen._", ""]
    for _, v in verdicts.iterrows():
        line = (f"- {v['role'].capitalize()}: `{v['arm']}` vs `{v['reference']}` on `{v['metric']}`: **{v['verdict']}**"
                + (f", magnitude {v['magnitude']}" if v["magnitude"] not in ("-", "") else "") + f" ({v['reason']}).")
        if v["selection"]:
            line += f" Tuned: {v['selection']}."
        if v["added_after_data"]:
            line += f" _Added after the data were seen: {v['added_after_data']}._"
        if v.get(EXPLORATORY):
            line += f" **Exploratory:** {v[EXPLORATORY]}."
        body.append(line)
    body += ["", md.table(verdicts, [
        ("arm", "arm"), ("reference", "reference"), ("variant", "variant"), ("metric", "check"), ("role", "role"),
        ("expect", "paper expects"), ("n", "seeds"), ("diff", "mean diff"), ("ci_low", "low"),
        ("ci_high", "high"), ("ci_level", "level"), ("p_test", "p (raw)"), ("p_holm", "p (Holm)"),
        ("family_size", "m"), ("paper_effect", "paper effect"), ("seed_sd", "seed sd"), ("mdd", "MDD"),
        ("seeds_needed", "seeds for 80%"), ("verdict", "direction"), ("magnitude", "magnitude"),
    ], {"diff": md.signed, "ci_low": md.signed, "ci_high": md.signed, "paper_effect": md.signed,
        "p_test": md.pvalue, "p_holm": md.pvalue, "ci_level": lambda x: md.fmt(x, 4)})]
    if (verdicts["metric"] == "speedup").any():
        body += ["", "For `speedup` the difference is the mean over seeds of ln(reference budget / arm tokens to the "
                 "reference's final val/loss): 0 means no speedup, ln 2 = 0.693 means 2x; the paper effect is ln "
                 "of its speedup. The speedup table below has the first-crossing reading beside it."]
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
    body = ["Each arm minus its reference on the final value, paired by seed; CI = 95% paired Student-t interval "
            "over seeds; p (t) = paired t-test (raw: not adjusted, this table gives no verdicts); p (sign-flip) = "
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
    body = ["Two different numbers, per reference arm, measured on the reference alone: the *seed sd* is the "
            "seed-to-seed standard deviation of its final values; the *MDD* here is the paired mean difference "
            "these seeds would detect with 80% power at the 5% level, taking the spread of a per-seed difference "
            "as sqrt(2) x seed sd (conservative: pairing usually removes more). The verdict table's MDD uses each "
            "comparison's own paired spread at its own level.", ""]
    body.append(md.table(noise, [("metric", "metric"), ("reference", "reference"), ("n", "seeds"),
                                 ("mean", "mean"), ("seed_sd", "seed sd"), ("mdd", "MDD")]))
    return Section("Seed noise of the references: seed sd and MDD", body)


def _speedup_section(speed: pd.DataFrame) -> Section:
    if speed.empty:
        return Section("Token efficiency", [])
    body = ["Tokens each arm needs to reach its paired reference seed's final val/loss (linear interpolation "
            "between evaluations; `never` = not reached within the budget), mean over seeds. Speedup (the "
            "papers' reading) = the reference's budget / the arm's tokens; first crossing = the reference's own "
            "first crossing of its final loss / the arm's (it follows noise where the reference's tail is flat); "
            "both geometric means over seeds. An arm that did not reach the target on some seed has no speedup.", ""]
    body.append(md.table(speed, [
        ("arm", "arm"), ("reference", "reference"), ("n", "seeds"), ("ref_budget", "reference budget"),
        ("ref_tokens", "reference first crossing"), ("arm_tokens", "arm tokens"), ("speedup", "speedup"),
        ("speedup_first_crossing", "first-crossing speedup"), ("per_seed", "per seed"), ("summary", "summary"),
    ]))
    return Section("Token efficiency: tokens to reach the reference's final val/loss", body)


def _overhead_section(cost: pd.DataFrame) -> Section:
    if cost.empty or not np.isfinite(cost["us_per_token"].to_numpy(dtype=float)).any():
        return Section("Overhead", [])
    body = ["Wall time per training token: median of the run's `tokens_per_s` logs (the first, warm-up "
            "one left out); ratio = geometric mean over seeds of arm / reference. Runs sharing a busy machine "
            "make this noisy; compare it with the spread between seeds.", ""]
    body.append(md.table(cost, [("arm", "arm"), ("reference", "reference"), ("n", "paired seeds"),
                                ("us_per_token", "µs per token"), ("ratio", "time ratio"),
                                ("ratio_min", "min"), ("ratio_max", "max")]))
    return Section("Overhead: wall time per token", body)


def _figures_section(ab: Ablation, effects: pd.DataFrame, verdicts: pd.DataFrame, out: Path) -> Section:
    """The loss curves and the effects forest plot, then every declared figure whose data exist: the core
    ones (analysis.declared_figures.CORE_FIGURES) and each technique's (its report.yaml), in folder order."""
    made: list[tuple[str, Path | None]] = [
        ("Every tested check: mean difference with the interval its verdict used, the paper's effect marked.",
         plot_forest(verdicts, out / FOREST_FILE, f"{ab.name}: verdicts")),
        ("Validation and training loss against tokens seen, per arm.", plots.plot_loss_curves(ab, out / "loss_vs_tokens.png")),
        ("Final val/loss difference per arm with its 95% paired t interval and the reference's seed sd.",
         plots.plot_effects(effects, "val/loss", out / "effects_val_loss.png",
                            f"{ab.name}: final val/loss, arm - reference (paired by seed)")),
    ]
    made += [(spec["caption"], declared_figures.plot_figure(ab, spec, out)) for spec in (*declared_figures.CORE_FIGURES, *figure_specs())]
    body = []
    for caption, path in made:
        if path is not None:
            body += [f"**{caption}**", "", f"![{caption}]({path.name})", ""]
    return Section("Figures", body)


def _plasticity_section(ab: Ablation, out: Path) -> Section:
    """When the grid's runs were fine-tuned: the plasticity table per recipe (analysis.plasticity)."""
    tables = plasticity_tables(ab)
    body: list[str] = []
    for table in tables:
        if len(tables) > 1:
            body += [f"### Recipe `{table.recipe.name}` ({table.recipe.hash})", ""]
        body += table_lines(table, heading="####" if len(tables) > 1 else "###")
    if tables:
        pd.concat([t.rows.assign(recipe=t.recipe.name, recipe_hash=t.recipe.hash) for t in tables]).to_csv(
            out / "plasticity_runs.csv", index=False)
        pd.concat([t.summary.assign(recipe=t.recipe.name, recipe_hash=t.recipe.hash) for t in tables]).to_csv(
            out / "plasticity_summary.csv", index=False)
    return Section("Plasticity: base loss against the gain from one fine-tuning recipe", body)


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
