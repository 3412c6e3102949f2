"""Plasticity: when the grid's runs were fine-tuned, base loss against the gain from one recipe, per recipe
(analysis.plasticity); its rows and summary also as CSVs."""

from __future__ import annotations

import pandas as pd

from analysis.plasticity import plasticity_tables, table_lines
from analysis.report_context import ReportContext
from analysis.sections import Section


def section(ctx: ReportContext) -> Section:
    tables = plasticity_tables(ctx.ab)
    body: list[str] = []
    for table in tables:
        if len(tables) > 1:
            body += [f"### Recipe `{table.recipe.name}` ({table.recipe.hash})", ""]
        body += table_lines(table, heading="####" if len(tables) > 1 else "###")
    if tables:
        pd.concat([t.rows.assign(recipe=t.recipe.name, recipe_hash=t.recipe.hash) for t in tables]).to_csv(
            ctx.out / "plasticity_runs.csv", index=False)
        pd.concat([t.summary.assign(recipe=t.recipe.name, recipe_hash=t.recipe.hash) for t in tables]).to_csv(
            ctx.out / "plasticity_summary.csv", index=False)
    return Section("Plasticity: base loss against the gain from one fine-tuning recipe", body)
