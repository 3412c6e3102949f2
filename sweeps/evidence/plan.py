"""A protocol's cells as data: spec -> typed cells -> the ablation driver's grids, composed and validated.

    cells = block_cells(spec, spec.blocks)             # every (arm, seed) of the blocks, as declared
    cells = block_cells(spec, blocks, chosen=rates)    # a tuned arm at its chosen rate (no rate: not run), a
                                                       # control (rate_of) at its reference's rate x factor
    cells = lr_tuning_cells(spec, launches)            # `<arm>@lr<rate>` on tuning seeds
    cells = finetune_tuning_bases(spec)                # `<arm>@ft_tuning` on the fine-tune's tuning seeds
    grids = launch_grids(spec, cells, args)            # sweeps.ablate Grids: one per seed set, each cell's overrides
    check_all(specs, args)                             # every cell composes and validates (the dry run)

A cell is its name (`ablation.arm`), its seed and the Hydra overrides over the preset that make it
(spec.arm_words, plus its rate); the launcher receives them as they are, with nothing re-parsed.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analysis.finetune_lr_tuning import tuning_base_arm
from lit_modules.config.errors import ConfigError
from sweeps import lr_tuning
from sweeps.evidence.declared import declared_checks
from sweeps.evidence.spec import Block, EvidenceSpec
from sweeps.finetune_tuning import load_base_recipe

if TYPE_CHECKING:
    from sweeps.ablate import Grid
    from sweeps.evidence.args import EvidenceArgs

TEST, LR_TUNING, FT_TUNING = "test", "lr tuning", "fine-tune tuning base"


@dataclass(frozen=True)
class Cell:
    """One run of a protocol: `name` (its ablation.arm) on `seed`, made by `words` over the preset."""

    name: str
    seed: int
    words: tuple[str, ...]
    kind: str = TEST


def block_cells(spec: EvidenceSpec, blocks: tuple[Block, ...] | list[Block],
               chosen: dict[str, float] | None = None) -> list[Cell]:
    """The blocks' cells. With `chosen` (arm -> rate, from the tuning stage) a tuned arm runs at its rate, a
    control (`rate_of`) at its reference's rate x its factor, and either without a rate is left out; without
    it every arm runs as declared (what the dry run composes)."""
    cells = []
    for block in blocks:
        for name in block.arms:
            words = rated_words(spec, name, chosen)
            if words is not None:
                cells += [Cell(name, seed, tuple(words)) for seed in block.seeds]
    return cells


def rated_words(spec: EvidenceSpec, name: str, chosen: dict[str, float] | None,
                cell_name: str | None = None) -> list[str] | None:
    """The cell's overrides at its tuned rate (or its reference's x the factor, for a control); None when it is
    tuned and `chosen` has no rate for it. Without `chosen`, the overrides as declared."""
    tuned = {a: t.key for t in spec.lr_tuning for a in t.arms}
    words = spec.arm_words(name, cell_name)
    source = spec.rate_source(name)
    rated, factor = source if source is not None else (name, 1.0)
    if chosen is None or rated not in tuned:
        return words
    if rated not in chosen:
        if source is not None:  # the reference's own line says why it has no rate
            print(f"[{spec.paper}] `{name}` runs at `{rated}`'s tuned rate (rate_of), which it did not "
                  "get: its test cells do not run", file=sys.stderr, flush=True)
        return None
    return [*words, f"{tuned[rated]}={chosen[rated] * factor!r}"]


def control_rates(spec: EvidenceSpec, chosen: dict[str, float]) -> dict[str, dict]:
    """For the provenance: each control cell that got a rate -> its reference's cell, the factor and the rate."""
    rates = {}
    for name in dict.fromkeys(a for b in spec.blocks for a in b.arms):
        source = spec.rate_source(name)
        if source is not None and source[0] in chosen:
            rates[name] = {"rate_of": source[0], "rate_factor": source[1], "rate": chosen[source[0]] * source[1]}
    return rates


def lr_tuning_cells(spec: EvidenceSpec, launches: list[lr_tuning.Launch]) -> list[Cell]:
    """The tuning cells of (grid, arm, rates, seeds) launches: the arm at each rate, named `<arm>@lr<rate>`."""
    return [Cell(name, seed, tuple([*spec.arm_words(arm, name), f"{tuning.key}={rate!r}"]), LR_TUNING)
            for tuning, arm, rates, seeds in launches for rate in rates
            for name in [tuning.cell_arm(arm, rate)] for seed in seeds]


def all_lr_tuning_cells(spec: EvidenceSpec) -> list[Cell]:
    return lr_tuning_cells(spec, [(t, a, t.grid, t.tuning_seeds) for t in spec.lr_tuning for a in t.arms])


def finetune_tuning_bases(spec: EvidenceSpec, chosen: dict[str, float] | None = None) -> list[Cell]:
    """Each fine-tune-tuned arm pre-trained on the tuning seeds as `<arm>@ft_tuning` (sweeps/finetune_tuning.py),
    at the arm's tuned pre-training rate when `chosen` is given (an arm tuned without a rate gets no base)."""
    tuning = spec.finetune_lr_tuning
    if tuning is None:
        return []
    cells = []
    for arm in tuning.arms:
        words = rated_words(spec, arm, chosen, tuning_base_arm(arm))
        if words is not None:
            cells += [Cell(tuning_base_arm(arm), seed, tuple(words), FT_TUNING) for seed in tuning.tuning_seeds]
    return cells


def launch_grids(spec: EvidenceSpec, cells: list[Cell], args: EvidenceArgs) -> list[Grid]:
    """The cells as the ablation driver's grids (run together in one launch): one grid per seed set, each cell
    name a grid arm with its own overrides, the command's run overrides for every cell."""
    from sweeps.ablate import Grid  # the launcher (MLflow, Lightning's progress lines): not on a refusal's path

    seeds_of: dict[str, list[int]] = defaultdict(list)
    words_of: dict[str, tuple[str, ...]] = {}
    for cell in cells:
        if words_of.setdefault(cell.name, cell.words) != cell.words:
            raise ConfigError(f"{spec.where}: the cell `{cell.name}` would run with two configs.")
        seeds_of[cell.name].append(cell.seed)
    names_of: dict[tuple[int, ...], list[str]] = defaultdict(list)
    for name, seeds in seeds_of.items():
        names_of[tuple(seeds)].append(name)
    return [Grid(experiment=spec.preset, arms=names, seeds=[str(s) for s in seeds], workers=args.workers,
                 report=False, overrides=list(args.overrides), runs_dir=args.runs_dir,
                 arm_overrides={n: list(words_of[n]) for n in names})
            for seeds, names in names_of.items()]


def check_all(specs: list[EvidenceSpec], args: EvidenceArgs) -> None:
    """Before any paper runs: every cell of every stage composes and validates (test cells as declared, tuning
    cells at every rate, fine-tune tuning bases), no command-line rate fights a tuned one, a Muon grid tunes a
    Muon arm, the checks name the claim's metrics and the protocol's arms, and the fine-tune recipe and its
    tasks exist."""
    from sweeps.ablate import validate_cells

    for spec in specs:
        lr_tuning.refuse_rate_override(args.overrides, spec.lr_tuning, spec.where)
        cells = [*block_cells(spec, spec.blocks), *all_lr_tuning_cells(spec), *finetune_tuning_bases(spec)]
        for grid in launch_grids(spec, cells, args):
            validate_cells(grid)
        _muon_grids_tune_muon(spec, args)
        declared_checks(spec)
        if spec.finetune:
            recipe = load_base_recipe(spec.finetune, args.recipe_overrides, spec.finetune_lr_tuning)
            if spec.finetune_eval:
                from lit_modules.evaluation.run_eval import eval_config_for

                problems = eval_config_for(None, {"tasks": list(spec.finetune_eval)}).problems(recipe.data)
                if problems:
                    raise ConfigError(f"{spec.where} finetune_eval: {problems[0]}")


def _muon_grids_tune_muon(spec: EvidenceSpec, args: EvidenceArgs) -> None:
    """A grid of optim.muon_lr tunes an arm that trains with Muon (on any other it would tune nothing)."""
    from lit_modules.config.composition import compose_run_config

    for tuning in spec.lr_tuning:
        if tuning.key != "optim.muon_lr":
            continue
        for arm in tuning.arms:
            cfg = compose_run_config([f"experiment={spec.preset}", *spec.arm_words(arm), *args.overrides])
            if cfg.optim.name != "muon":
                raise ConfigError(f"{spec.where} lr_tuning tunes optim.muon_lr of `{arm}`, which trains with "
                                  f"{cfg.optim.name}, not Muon: that grid would tune nothing.")
