"""What this run measured: the model and budget, the variants and arms, the seeds, the code and threads."""

from __future__ import annotations

import pandas as pd

from analysis import markdown as md
from analysis.ablation import Ablation
from analysis.claims import split_arm
from analysis.comparisons import reference_of
from analysis.load_runs import numeric
from analysis.report_context import ReportContext
from analysis.seeds import seed_key
from analysis.sections import Section, first_value


def section(ctx: ReportContext) -> Section:
    ab, claim = ctx.ab, ctx.claim
    f = ab.finished
    body = []
    if f.empty:
        return Section("What this run measured", ["_No child run finished: nothing to measure._",
                                                  "", status_counts(ab)])
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
    body.append(f"- {status_counts(ab)}")
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


def status_counts(ab: Ablation) -> str:
    counts = ab.runs.groupby("status").size().to_dict() if not ab.runs.empty else {}
    text = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no child runs"
    return f"Child runs: {text} (only FINISHED runs enter the statistics)."
