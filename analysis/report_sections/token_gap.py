"""Token-level gap by difficulty: per arm, the token-gap table computed when the ablation was read
(analysis.store_ablation), with its figure."""

from __future__ import annotations

from analysis.report_context import ReportContext
from analysis.results_data import safe_name
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    from analysis.token_gap import COLUMNS, plot_token_gap

    ab, out = ctx.ab, ctx.out
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
        stem = f"token_gap_{safe_name(arm)}"
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
