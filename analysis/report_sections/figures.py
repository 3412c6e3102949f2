"""Figures: the forest plot of the verdicts, the loss curves, the val/loss effects, then every declared
figure whose data exist: the core ones (analysis.declared_figures.CORE_FIGURES) and each technique's (its
report.yaml), in folder order."""

from __future__ import annotations

from pathlib import Path

from analysis import declared_figures, plots
from analysis.forest import FOREST_FILE, plot_forest
from analysis.report_context import ReportContext
from analysis.sections import Section
from lit_modules.technique_reports import figure_specs


def section(ctx: ReportContext) -> Section:
    ab, out = ctx.ab, ctx.out
    made: list[tuple[str, Path | None]] = [
        ("Every tested check: mean difference with the interval its verdict used, the paper's effect marked.",
         plot_forest(ctx.verdicts, out / FOREST_FILE, f"{ab.name}: verdicts")),
        ("Validation and training loss against tokens seen, per arm.", plots.plot_loss_curves(ab, out / "loss_vs_tokens.png")),
        ("Final val/loss difference per arm with its 95% paired t interval and the reference's seed sd.",
         plots.plot_effects(ctx.effects, "val/loss", out / "effects_val_loss.png",
                            f"{ab.name}: final val/loss, arm - reference (paired by seed)")),
    ]
    made += [(spec["caption"], declared_figures.plot_figure(ab, spec, out))
             for spec in (*declared_figures.CORE_FIGURES, *figure_specs())]
    body = []
    for caption, path in made:
        if path is not None:
            body += [f"**{caption}**", "", f"![{caption}]({path.name})", ""]
    return Section("Figures", body)
