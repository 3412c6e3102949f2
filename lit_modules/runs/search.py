"""Finding runs by their tags: a grid's or study's parent, its cells, a base run's fine-tune.

    parent = find_parent(client, "wd_plasticity")            # newest ablation parent, else sweep parent
    bases = grid_bases(client, parent)                      # FINISHED cells, one per (arm, seed)
    done = finished_finetune(client, base, recipe_hash)      # the fine-tune of `base` under one recipe

The drivers that open parents (sweeps.ablate, sweeps.optuna_sweep) use `parent_tags` and `parent_filter`,
so a parent is written and found again by the same keys.
"""

from __future__ import annotations

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from lit_modules.runs import tags

ABLATION = "ablation"
SWEEP = "sweep"
# kind -> (the tag naming the grid or study, the tag giving the run's role in it)
PARENT_KINDS = {ABLATION: (tags.ABLATION_NAME, tags.ABLATION_ROLE), SWEEP: (tags.SWEEP_STUDY, tags.SWEEP_ROLE)}
NEWEST_FIRST = ["attributes.start_time DESC"]
OLDEST_FIRST = ["attributes.start_time ASC"]


def parent_tags(kind: str, name: str) -> dict[str, str]:
    name_tag, role_tag = PARENT_KINDS[kind]
    return {name_tag: name, role_tag: tags.PARENT_ROLE}


def parent_filter(kind: str, name: str) -> str:
    """The MLflow filter matching the parent run of the grid (or study) `name`."""
    return " and ".join(f"tags.`{k}` = '{v}'" for k, v in parent_tags(kind, name).items())


def children_filter(parent_run_id: str) -> str:
    return f"tags.`{tags.PARENT}` = '{parent_run_id}'"


def find_parent(client: MlflowClient, name: str, kinds: tuple[str, ...] = (ABLATION, SWEEP)) -> Run | None:
    """The newest parent run of the grid (then the study) called `name`, in any experiment; None if none."""
    ids = [e.experiment_id for e in client.search_experiments()]
    if not ids:
        return None
    for kind in kinds:
        found = client.search_runs(ids, filter_string=parent_filter(kind, name), order_by=NEWEST_FIRST, max_results=1)
        if found:
            return found[0]
    return None


def grid_bases(client: MlflowClient, parent: Run) -> list[Run]:
    """FINISHED children of a grid parent, one per (arm, seed) (the newest), oldest first; fine-tunes excluded."""
    children = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"{children_filter(parent.info.run_id)} and attributes.status = 'FINISHED'",
        order_by=OLDEST_FIRST,
    )
    newest: dict[tuple[str, str], Run] = {}
    for run in children:
        if tags.FINETUNE_BASE in run.data.tags:
            continue
        newest[(run.data.tags.get(tags.ABLATION_ARM, run.info.run_id), run.data.tags.get(tags.SEED, ""))] = run
    return sorted(newest.values(), key=lambda r: r.info.start_time)


def finished_finetune(client: MlflowClient, base: Run, recipe_hash: str) -> Run | None:
    """The newest FINISHED fine-tune of `base` under exactly one recipe's settings (its hash)."""
    found = client.search_runs(
        [base.info.experiment_id],
        filter_string=f"tags.`{tags.FINETUNE_BASE}` = '{base.info.run_id}' "
        f"and tags.`{tags.FINETUNE_RECIPE_HASH}` = '{recipe_hash}' and attributes.status = 'FINISHED'",
        order_by=NEWEST_FIRST, max_results=1,
    )
    return found[0] if found else None
