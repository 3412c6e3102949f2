"""The evidence protocol's fine-tune rate tuning: each base arm's fine-tune rate, chosen on tuning seeds.

    finetune: python_docs           # in conf/evidence/<paper>.yaml: the recipe every base is fine-tuned with
    finetune_lr_tuning:
      grid: [3.0e-4, 1.0e-3, 3.0e-3]   # finetune.lr values, two or more
      tuning_seeds: [100, 101]      # none of them a seed a block runs a tuned arm on
      metric: finetune/target_loss_after   # the fine-tune metric the rate is chosen by (the default)
      arms: [...]                   # the arms tuned (the default: every arm of the protocol's blocks)

After the test cells, each tuned arm pre-trains on the tuning seeds as `<arm>@ft_tuning` (its own config, a
grid cell no comparison reads), each of those bases is fine-tuned at every grid rate (the recipe with
`lr=<rate>`), and the arm's rate is the one with the best mean metric over its tuning seeds
(analysis/finetune_lr_tuning.py, by analysis/lr_tuning.py's rule); then the arm's test bases are fine-tuned at
that rate only. Done cells and fine-tunes are not run again, so an interrupted protocol resumes here too. An arm
whose grid is incomplete gets no rate: its test bases are not fine-tuned and the protocol ends failed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pandas as pd

from analysis.finetune_lr_tuning import FINETUNE_RATE_KEY, tuning_base_arm, tuning_runs
from analysis.lr_tuning import LrTuning, rate_text, tuning_table
from lit_modules.config.errors import ConfigError
from lit_modules.config.finetune_recipe import FinetuneRecipe, load_recipe
from lit_modules.runs import tags

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from sweeps.evidence.spec import Block

KEYS = ("grid", "tuning_seeds", "metric", "arms")
DEFAULT_METRIC = tags.TARGET_LOSS_AFTER


def parse_finetune_tuning(node: object, where: str, blocks: tuple[Block, ...], recipe: str | None) -> LrTuning | None:
    """The `finetune_lr_tuning:` node, checked against the blocks; a bad one is one sentence (ConfigError)."""
    if node is None:
        return None
    if not recipe:
        raise ConfigError(f"{where}: finetune_lr_tuning tunes the fine-tune's rate, so it needs a 'finetune' recipe.")
    if not isinstance(node, dict) or not {"grid", "tuning_seeds"} <= set(node) <= set(KEYS):
        have = ", ".join(map(str, node)) if isinstance(node, dict) else type(node).__name__
        raise ConfigError(f"{where} finetune_lr_tuning needs 'grid' and 'tuning_seeds' (and may name 'metric' and "
                          f"'arms'); it has {have or 'nothing'}.")
    block_arms = list(dict.fromkeys(a for b in blocks for a in b.arms))
    arms, grid, seeds = node.get("arms") or block_arms, node["grid"], node["tuning_seeds"]
    if not all(isinstance(x, list) and x for x in (arms, grid, seeds)):
        raise ConfigError(f"{where} finetune_lr_tuning: grid, tuning_seeds (and arms) are non-empty lists.")
    try:
        rates, seeds = tuple(float(r) for r in grid), tuple(int(s) for s in seeds)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} finetune_lr_tuning: grid holds learning rates and tuning_seeds integers "
                          f"(got {grid} and {seeds}).") from None
    if len(rates) < 2 or min(rates) <= 0 or len({rate_text(r) for r in rates}) != len(rates):
        raise ConfigError(f"{where} finetune_lr_tuning: grid needs two or more distinct positive rates (got {grid}).")
    if len(set(seeds)) != len(seeds) or len(set(arms)) != len(arms):
        raise ConfigError(f"{where} finetune_lr_tuning: an arm or a tuning seed is listed twice.")
    for arm in arms:
        if arm not in block_arms:
            raise ConfigError(f"{where} finetune_lr_tuning tunes `{arm}`, which no block of the protocol runs "
                              f"(its blocks run {', '.join(block_arms)}).")
        shared = sorted({s for b in blocks if arm in b.arms for s in b.seeds} & set(seeds))
        if shared:
            raise ConfigError(f"{where} finetune_lr_tuning: tuning seed(s) {', '.join(map(str, shared))} are also "
                              f"test seeds of `{arm}`; a rate chosen on the bases it is tested on is biased upward, "
                              "so tune on seeds no block runs it on.")
    metric = str(node.get("metric", DEFAULT_METRIC))
    if not metric.startswith("finetune/") or "*" in metric:
        raise ConfigError(f"{where} finetune_lr_tuning: metric is a final metric of the fine-tune runs, such as "
                          f"{DEFAULT_METRIC} (got {metric}).")
    return LrTuning(tuple(str(a) for a in arms), rates, seeds, metric, FINETUNE_RATE_KEY)


def recipe_at(recipe: FinetuneRecipe, rate: float) -> FinetuneRecipe:
    return replace(recipe, lr=float(rate))


def tuning_jobs(client: MlflowClient, parent_bases: list, tuning: LrTuning,
                recipe: FinetuneRecipe) -> list[tuple[str, FinetuneRecipe]]:
    """(tuning base run id, recipe at a grid rate) for every fine-tune of the grid not finished yet."""
    from lit_modules.config.finetune_recipe import recipe_hash
    from lit_modules.runs.search import finished_finetune

    wanted = {tuning_base_arm(a) for a in tuning.arms}
    seeds = {str(s) for s in tuning.tuning_seeds}
    bases = [b for b in parent_bases if b.data.tags.get(tags.ABLATION_ARM) in wanted and b.data.tags.get(tags.SEED) in seeds]
    return [(b.info.run_id, recipe_at(recipe, rate)) for b in bases for rate in sorted(tuning.grid)
            if finished_finetune(client, b, recipe_hash(recipe_at(recipe, rate))) is None]


def store_frames(client: MlflowClient, parent_bases: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the grid's finished bases: run_id, arm, seed; every fine-tune of them, as finetune_runs.csv's columns)."""
    runs = pd.DataFrame([{"run_id": b.info.run_id, "arm": b.data.tags.get(tags.ABLATION_ARM),
                          "seed": b.data.tags.get(tags.SEED)} for b in parent_bases], columns=["run_id", "arm", "seed"])
    if not parent_bases:
        return runs, pd.DataFrame()
    grid = parent_bases[0].data.tags.get("mlflow.parentRunId", "")  # a fine-tune records its base's grid parent
    found = client.search_runs([parent_bases[0].info.experiment_id],
                               filter_string=f"tags.`{tags.FINETUNE_GRID_PARENT}` = '{grid}'", max_results=10_000)
    finetunes = pd.DataFrame([{
        f"tags.{tags.FINETUNE_BASE}": r.data.tags[tags.FINETUNE_BASE], "status": r.info.status,
        "start_time": r.info.start_time, "params.optim.lr": r.data.params.get("optim.lr"),
        "tags.end_reason": r.data.tags.get(tags.END_REASON, ""),
        **{f"metrics.{k}": v for k, v in r.data.metrics.items()},
    } for r in found])
    return runs, finetunes


def choose(paper: str, tuning: LrTuning, client: MlflowClient, parent_bases: list) -> tuple[dict[str, float], list[str]]:
    """(arm -> its fine-tune rate, arms with none), printed as the driver's lines."""
    from sweeps.lr_tuning import announce_choices

    table = tuning_table(tuning, tuning_runs(*store_frames(client, parent_bases)))
    return announce_choices(f"[{paper}] fine-tune rate", tuning, table, "fine-tunes its test bases at",
                            "its test bases are not fine-tuned")


def recipe_of_arm(recipe: FinetuneRecipe, tuning: LrTuning | None,
                  chosen: dict[str, float]) -> Callable[[str], FinetuneRecipe | None]:
    """arm -> the recipe its test bases are fine-tuned with: the recipe itself for an untuned arm, at the
    arm's chosen rate for a tuned one, None for a tuned arm without a rate."""
    tuned = set(tuning.arms) if tuning is not None else set()

    def of(arm: str) -> FinetuneRecipe | None:
        if arm not in tuned:
            return recipe
        return recipe_at(recipe, chosen[arm]) if arm in chosen else None

    return of


def load_base_recipe(name: str, overrides: dict[str, str], tuning: LrTuning | None) -> FinetuneRecipe:
    """The protocol's recipe; a command-line `finetune.lr` over a tuned grid is refused (one sentence)."""
    if tuning is not None and "lr" in overrides:
        raise ConfigError(f"finetune.lr={overrides['lr']} on the command line would set every fine-tune's rate, but "
                          "the protocol tunes each arm's own (finetune_lr_tuning); drop it.")
    return load_recipe(name, overrides)
