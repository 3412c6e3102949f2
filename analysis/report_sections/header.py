"""Scale and provenance: where the measurements come from, and every arm's parameters, tokens and seeds."""

from __future__ import annotations

from analysis import markdown as md
from analysis import provenance as prov
from analysis.protocol_revision import pending_line, superseded_line
from analysis.report_context import ReportContext
from analysis.results_data import DATA_DIR
from analysis.scale import MATCHED_TPP, count, number
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    claim, parent, provenance = ctx.claim, ctx.ab.parent, ctx.provenance
    standing = [line for line in (superseded_line(ctx.ab.name, provenance), pending_line(provenance, ctx.ab.runs))
                if line]
    body = [f"_{line}_" for line in standing] + ([""] if standing else [])
    body += [f"Parent run `{parent.run_id}` ({parent.status}), measurements read from `{parent.source}`; claim "
             f"`{claim.preset}`. The same report is made from the MLflow store (`EXP=`) and from an exported "
             f"results folder's `{DATA_DIR}/` files (`python -m analysis.report FROM=<folder>`)." if parent else
             "No parent run record."]
    if provenance:
        body += ["", f"**Provenance:** {prov.describe(provenance)}."]
    body += ["", f"**Scale** (per arm: medians over its finished runs; TPP = tokens per non-embedding parameter; "
                 f"matched scale needs >= {MATCHED_TPP:g} TPP, or the paper's own TPP where lower). Paper: "
                 f"{claim.paper_scale}; {claim.paper_tpp_note}.", ""]
    body.append(md.table(ctx.scale, [
        ("arm", "arm"), ("variant", "variant"), ("params_total", "parameters"),
        ("params_non_embedding", "non-embedding"), ("tokens", "tokens"), ("tpp", "TPP"),
        ("paper_tpp", "paper TPP"), ("matched", "matched scale"), ("seeds", "seeds"),
    ], {"params_total": count, "params_non_embedding": count, "tokens": count, "tpp": number, "paper_tpp": number}))
    return Section("Scale and provenance", body)
