"""The report's learning-rate tuning: loss against rate per tuned arm, the rate each got, and whether its
test runs ran at it.

    section = lr_tuning_section(ab, provenance, out)    # writes lr_tuning.csv and lr_tuning.png beside report.md

Drawn only for a results folder whose provenance declares `lr_tuning` or `finetune_lr_tuning`
(sweeps/evidence/ records the protocol's grids there when its cells run). The table is made again from the
exported runs (the tuning cells are runs of the grid, `<arm>@lr<rate>` on the tuning seeds; a fine-tune
grid's cells are the fine-tunes of the `<arm>@ft_tuning` bases, analysis/finetune_lr_tuning.py) by the rule
the driver chose with (analysis/lr_tuning.py), so it is regenerable from `data/` alone; a choice that differs
from the one the driver recorded (`lr_tuning_chosen`, `finetune_lr_tuning_chosen`), or test runs at another
rate, is said in the section.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import markdown as md
from analysis.ablation import Ablation, better_direction
from analysis.finetune_lr_tuning import FINETUNE_RATE_KEY, tuning_runs
from analysis.lr_tuning import LrTuning, chosen_rates, declared_tunings, rate_text, tuning_cells, tuning_table
from analysis.plots import grid_shape, new_figure, save_figure
from analysis.sections import Section
from analysis.seeds import seed_key

LR_TUNING_FILE, LR_TUNING_FIGURE = "lr_tuning.csv", "lr_tuning.png"
TITLE = "Learning rates: each arm's own, chosen on tuning seeds"


def lr_tuning_section(ab: Ablation, provenance: dict | None, out: Path) -> Section:
    tunings = declared_tunings(provenance)
    if not tunings:
        return Section(TITLE, [])
    cells_of = {FINETUNE_RATE_KEY: tuning_runs(ab.runs, ab.finetunes)}  # a fine-tune grid's cells are fine-tunes
    tables = [tuning_table(t, cells_of.get(t.key, ab.runs)).assign(key=t.key) for t in tunings]
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(Path(out) / LR_TUNING_FILE, index=False)
    figure = plot_lr_tuning(tunings, [tuning_cells(t, cells_of.get(t.key, ab.runs)) for t in tunings], tables,
                            Path(out) / LR_TUNING_FIGURE, ab.name)
    record = provenance or {}
    body = [("Each tuned arm ran at every rate of its grid (`optim.lr`, or the field it names) on the tuning "
             "seeds only; its rate is the "
             "one with the best mean final metric over them, and its test runs (the seeds the verdicts use, none "
             "of them a tuning seed) ran at that rate. A rate where a tuning seed diverged is ruled out; an arm "
             "with a tuning cell missing gets no rate."), ""]
    if any(t.key == FINETUNE_RATE_KEY for t in tunings):
        body += [("The fine-tune's rate (`finetune.lr`) is chosen the same way per arm: each arm pre-trained on the "
                  "tuning seeds as `<arm>@ft_tuning` (a base no comparison reads), each such base was fine-tuned at "
                  "every rate, and the arm's test bases were fine-tuned at the rate with the best mean fine-tune "
                  "metric over those bases."), ""]
    for t, t_table in zip(tunings, tables):
        chosen = chosen_rates(t_table)
        recorded = record.get("finetune_lr_tuning_chosen" if t.key == FINETUNE_RATE_KEY else "lr_tuning_chosen") or {}
        for arm in t.arms:
            body.append(f"- {_arm_line(ab, arm, t.key, chosen.get(arm), recorded.get(arm))}{_grid_words(t, t_table, arm)}")
    body += ["", md.table(table, [("arm", "arm"), ("key", "rate of"), ("rate", "rate"), ("tuning_seeds", "tuning seeds"),
                                  ("n", "finished"),
                                  ("metric", "metric"), ("final_loss", "mean final"), ("per_seed", "per seed"),
                                  ("chosen", "chosen"), ("note", "note")], {"rate": rate_text, "final_loss": lambda x: md.fmt(x, 5)})]
    if figure is not None:
        caption = "Final metric against learning rate per tuned arm (tuning seeds; the chosen rate ringed)."
        body += ["", f"**{caption}**", "", f"![{caption}]({figure.name})"]
    return Section(TITLE, body)


def _arm_line(ab: Ablation, arm: str, key: str, chosen: float | None, recorded) -> str:
    """Which rate the arm got, and which rate its test runs record (params.<key>; for the fine-tune's rate,
    the optim.lr its test bases' fine-tunes ran at)."""
    rows = ab.finished[ab.finished["arm"] == arm]
    if key == FINETUNE_RATE_KEY:
        ft = ab.finetunes
        of_arm = ft[ft["tags.finetune.base_run_id"].isin(set(rows["run_id"]))] if "tags.finetune.base_run_id" in ft else ft
        rates = of_arm.get("params.optim.lr", pd.Series(dtype=str))
    else:
        rates = rows.get(f"params.{key}", pd.Series(dtype=str))
    ran = sorted({float(v) for v in rates.dropna() if v != ""})
    seeds = ",".join(sorted(rows["seed"], key=seed_key)) or "none"
    if chosen is None:
        line = f"`{arm}`: no rate chosen (see the table)"
    else:
        line = f"`{arm}`: {rate_text(chosen)}"
    line += f"; its test runs (seeds {seeds}) ran at {', '.join(rate_text(r) for r in ran) or 'no recorded rate'}"
    if chosen is not None and ran and any(not math.isclose(r, chosen, rel_tol=1e-9) for r in ran):
        read = recorded is not None and math.isclose(float(recorded), chosen, rel_tol=1e-9)  # at_chosen_rates filters
        if key == FINETUNE_RATE_KEY and read and any(math.isclose(r, chosen, rel_tol=1e-9) for r in ran):
            line += f" (the comparisons read only the fine-tunes at {rate_text(chosen)})"
        else:
            line += " **(not the chosen rate)**"
    if recorded is not None and (chosen is None or not math.isclose(float(recorded), chosen, rel_tol=1e-9)):
        line += f" **(the driver chose {rate_text(float(recorded))} when the cells ran)**"
    return line + "."


def _grid_words(tuning: LrTuning, table: pd.DataFrame, arm: str) -> str:
    """How finely and on how many cells the arm was tuned: its finished tuning cells, rates x seeds, the widest
    step between neighbouring rates, and the grid's growth under its declared rules."""
    rows = table[table["arm"] == arm]
    rates = sorted(float(r) for r in rows["rate"])
    if len(rates) < 2:
        return ""
    step = max(b / a for a, b in zip(rates, rates[1:]))
    seeds = str(rows["tuning_seeds"].iloc[0]).split(",")
    words = (f" Tuned on {int(rows['n'].sum())} finished cells ({len(rates)} rates x {len(seeds)} seeds), "
             f"neighbouring rates at most x{step:.3g} apart")
    extra = sorted(set(rates) - set(tuning.grid))
    if extra:
        words += f"; {', '.join(map(rate_text, extra))} added past the declared grid's edge"
    if set(int(s) for s in seeds) - set(tuning.tuning_seeds):
        words += "; the tuning seeds chose different rates, so the tie-break seed(s) ran too"
    return words + "."


def plot_lr_tuning(tunings: list[LrTuning], cells: list[pd.DataFrame], tables: list[pd.DataFrame], path: Path,
                   name: str) -> Path | None:
    """One panel per declared grid: each arm's per-seed and mean final metric against the rate (log axis)."""
    if all(not (c["state"] == "finished").any() for c in cells):
        return None
    fig, axes = new_figure(*grid_shape(len(tunings)), width=6.0)
    for ax in list(axes.flat)[len(tunings):]:
        ax.set_visible(False)
    for ax, tuning, seeds, table in zip(axes.flat, tunings, cells, tables):
        for i, arm in enumerate(tuning.arms):
            rows, color = table[table["arm"] == arm], f"C{i % 10}"
            done = seeds[(seeds["arm"] == arm) & (seeds["state"] == "finished")]  # also of an incomplete rate
            ax.scatter(done["rate"], done["value"], s=10, color=color, alpha=0.5)
            means = rows[np.isfinite(rows["final_loss"].astype(float))]
            ax.plot(means["rate"], means["final_loss"], "o-", color=color, label=f"{arm}: mean over seeds (ringed: chosen)")
            picked = rows[rows["chosen"].astype(bool)]
            ax.scatter(picked["rate"], picked["final_loss"], s=160, facecolors="none", edgecolors=color, linewidths=2)
        ax.set_xscale("log")
        ax.set_xticks(sorted(tuning.grid), labels=[rate_text(r) for r in sorted(tuning.grid)])
        ax.set_xticks([], minor=True)
        ax.set_xlabel(f"peak learning rate ({tuning.key}, log scale)")
        ax.set_ylabel(f"final {tuning.metric} ({better_direction(tuning.metric)} is better)")
        ax.set_title(f"{name}: tuning seeds {', '.join(map(str, tuning.tuning_seeds))}", fontsize=9)
        ax.legend(fontsize=8)
    return save_figure(fig, path)
