"""What each paper's evidence protocol would cost at GPU scale: GPU-hours per recipe size, from the dry-run plan.

    python -m sweeps.gpu_cost [papers=pc_layer,wisca,...] [recipes=gpt2_124m,...] [gpu=h100] [devices=8] [mfu=0.4]

For every paper (conf/evidence/<paper>.yaml, its headline cells: arms x seeds, and its learning-rate tuning
cells: grid x tuning seeds; a fine-tune rate grid's bases: one per tuning seed) and every GPU recipe (conf/recipe/<size>.yaml), each arm is composed as `make evidence` composes its cells
(experiment=<preset> +arm=<preset>/<arm>) with recipe=<size> and the node on top, validated and planned
(lit_modules/plan); a cell costs its plan's GPU-hours, an arm that many times its seeds. The below and scale
stages are left out: their rungs (0.25x, 0.5x, 4x) are CPU models, and at GPU scale the recipe sizes are the ladder. Nothing is trained,
no store is touched. Prints two markdown tables: each recipe's plan, and each protocol's GPU-hours.
mfu=0.4 is the planner's assumption (plan.mfu), to be replaced by the figure `make gpu-check` measures.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lit_modules.config import files
from lit_modules.config.arguments import NAMES, POSITIVE_INT, TEXT, Arg, Verb, parse_words
from lit_modules.config.budget import parameter_counts
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validated
from lit_modules.plan.devices import GPUS

if TYPE_CHECKING:  # torch (memory's sizes) and the protocols (MLflow, pandas) load once the words passed
    from lit_modules.plan.gpu_plan import GpuPlan
    from sweeps.evidence.spec import EvidenceSpec

VERB = Verb(
    "gpu-cost",
    {"papers": Arg(NAMES), "recipes": Arg(NAMES), "gpu": Arg(TEXT, default="h100"),
     "devices": Arg(POSITIVE_INT, default=8), "mfu": Arg(TEXT, default="0.4")},
    aliases={"PAPERS": "papers", "RECIPES": "recipes"},
)


@dataclass(frozen=True)
class Cell:
    """One arm of one protocol at one recipe size, planned."""

    paper: str
    arm: str
    seeds: int
    recipe: str
    plan: GpuPlan
    tokens_per_step: int
    steps: int
    warmup: int

    @property
    def gpu_hours(self) -> float:
        return self.seeds * (self.plan.gpu_hours or 0.0)


def plan_of(overrides: list[str], gpu: str, devices: int, mfu: str) -> tuple[GpuPlan, object]:
    """The GPU plan of a composed config on the node, and its budget."""
    from lit_modules.plan.gpu_plan import plan_gpu_run

    cfg = compose_run_config([*overrides, f"trainer.devices={devices}", f"plan.gpu={gpu}", f"plan.mfu={mfu}",
                              "dry_run=true"])
    checked = validated(cfg)
    return plan_gpu_run(checked.config, checked.budget), checked.budget


def protocol_cells(spec: EvidenceSpec, recipe: str, gpu: str, devices: int, mfu: str) -> list[Cell]:
    seeds: dict[str, int] = {}  # arm -> its cells: test seeds, plus grid x tuning seeds for a tuned arm
    headline = spec.in_stages(["headline"]).at_recipe_size(recipe)  # what `sweeps.evidence recipe=...` runs

    def add(arm: str, n: int) -> None:
        seeds[arm] = seeds.get(arm, 0) + n

    for block in headline.blocks:
        for arm in block.arms:
            add(arm, len(block.seeds))
    for tuning in headline.lr_tuning:
        for arm in tuning.arms:
            add(arm, len(tuning.grid) * len(tuning.tuning_seeds))
    if headline.finetune_lr_tuning is not None:  # one pre-trained base per tuning seed (its fine-tunes: not counted)
        for arm in headline.finetune_lr_tuning.arms:
            add(arm, len(headline.finetune_lr_tuning.tuning_seeds))
    cells = []
    for arm, n in seeds.items():
        # Any seed: the cells of an arm cost the same.
        plan, budget = plan_of([f"experiment={spec.preset}", *spec.arm_words(arm), f"recipe={recipe}"],
                               gpu, devices, mfu)
        cells.append(Cell(spec.paper, arm, n, recipe, plan, budget.tokens_per_step, budget.steps, budget.warmup_steps))
    return cells


def recipe_table(recipes: list[str], gpu: str, devices: int, mfu: str) -> list[str]:
    """One row per recipe: its own plan (recipe=<size> alone: 20 tokens per parameter, no technique)."""
    from lit_modules.config.memory import GIB

    rows = ["| recipe | tokens/step (micro x seq x devices x accumulation) | steps at 20 TPP (warmup) | ETA per run | "
            "GPU-hours per run | memory per device, DDP / FSDP (GiB) |", "|---|---|---|---|---|---|"]
    for recipe in recipes:
        plan, budget = plan_of([f"recipe={recipe}"], gpu, devices, mfu)
        cfg = compose_run_config([f"recipe={recipe}"])
        micro, seq = cfg.data.batch_size, cfg.data.seq_len
        accumulation = budget.tokens_per_step // (micro * seq * plan.world)
        fsdp = next(x for x in plan.placements if x.layout == "fsdp" and not x.checkpointing)
        rows.append(f"| {recipe} | {budget.tokens_per_step:,} ({micro} x {seq} x {plan.world} x {accumulation}) | "
                    f"{budget.steps:,} ({budget.warmup_steps}) | {_duration(plan.seconds)} | {plan.gpu_hours:.1f} | "
                    f"{plan.chosen.memory.total / GIB:.1f} / {fsdp.memory.total / GIB:.1f} |")
    return rows


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def cost_table(cells: list[Cell], recipes: list[str]) -> list[str]:
    rows = [f"| paper (headline cells) | {' | '.join(recipes)} |", "|---|" + "---|" * len(recipes)]
    for paper in dict.fromkeys(c.paper for c in cells):
        mine = [c for c in cells if c.paper == paper]
        n = sum(c.seeds for c in mine if c.recipe == recipes[0])
        misfit = {c.recipe for c in mine if c.plan.refusal}
        hours = {r: sum(c.gpu_hours for c in mine if c.recipe == r) for r in recipes}
        rows.append(f"| {paper} ({n}) | " + " | ".join(
            f"{hours[r]:,.0f}" + (" (some cells do not fit)" if r in misfit else "") for r in recipes) + " |")
    totals = {r: sum(c.gpu_hours for c in cells if c.recipe == r) for r in recipes}
    rows.append("| total | " + " | ".join(f"{totals[r]:,.0f}" for r in recipes) + " |")
    return rows


def _model_size(recipe: str) -> int:
    """A recipe's parameter count (meta device, instant): the tables go from the smallest size up."""
    return parameter_counts(compose_run_config([f"recipe={recipe}"]).model)["total"]


def check_node_words(gpu: str, mfu: str) -> None:
    """`gpu=` and `mfu=` refused in the words the user typed (the plan would name plan.gpu and plan.mfu)."""
    if gpu not in GPUS:
        raise ConfigError(f"gpu={gpu} is not a GPU the planner knows; choose one of {', '.join(GPUS)}.")
    try:
        share = float(mfu)
    except ValueError:
        share = None
    if share is None or not 0 < share <= 1:
        raise ConfigError(f"mfu={mfu} must be a number in (0, 1], the share of the GPU's peak reached (e.g. 0.4).")


def main(argv: list[str] | None = None) -> int:
    try:
        words = parse_words(sys.argv[1:] if argv is None else argv, VERB)
        check_node_words(words["gpu"], words["mfu"])
        from sweeps.evidence.protocol_file import known_papers, load_spec

        papers = words["papers"] or known_papers()
        recipes = words["recipes"] or sorted(files.options("recipe"), key=_model_size)
        unknown = [r for r in recipes if not files.has_option("recipe", r)]
        if unknown:
            raise ConfigError(files.missing_option_sentence("recipe", unknown[0]))
        specs = [load_spec(p) for p in papers]
        cells = [c for r in recipes for s in specs
                 for c in protocol_cells(s, r, words["gpu"], words["devices"], words["mfu"])]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    first = cells[0].plan
    print(f"GPU plan on {first.world} x {first.gpu.label} at {first.mfu:.0%} MFU (assumed), DDP, no activation "
          "checkpointing, bf16; training FLOPs only (validation, evaluation, techniques' own compute and "
          "the weight-decay protocol's fine-tunes not counted).\n")
    print("\n".join(recipe_table(recipes, words["gpu"], words["devices"], words["mfu"])))
    print("\nGPU-hours of each protocol's headline cells (arms x seeds):\n")
    print("\n".join(cost_table(cells, recipes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
