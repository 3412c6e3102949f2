"""The evidence protocol's fine-tune stage: every finished test cell fine-tuned with the protocol's recipe,
then each fine-tuned model scored zero-shot on `finetune_eval`, both in spawned workers, skipping done ones.

    failed = finetune_bases(spec, args, workers)       # fine-tunes the grid's bases that lack this recipe's
    failed += evaluate_finetunes(spec, args, workers)  # scores the fine-tunes not yet scored on the tasks

A learning-rate tuning cell (`<arm>@lr<rate>` on a tuning seed, sweeps/lr_tuning.py) is no base: it chose a
rate, the test cells carry the claim. Split out of sweeps/evidence.py, which runs the stages in order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from multiprocessing import get_context
from typing import TYPE_CHECKING

from lit_modules.config.finetune_recipe import load_recipe
from lit_modules.runs import tags

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

    from sweeps.evidence import EvidenceArgs, EvidenceSpec


def finished_test_cells(client: MlflowClient, spec: EvidenceSpec) -> list[Run]:
    """The finished cells of the preset's grid, tuning cells left out (oldest first)."""
    from lit_modules.runs.search import ABLATION, find_parent, grid_bases

    parent = find_parent(client, spec.preset, kinds=(ABLATION,))
    tuning = spec.tuning_cells()
    return [b for b in (grid_bases(client, parent) if parent is not None else [])
            if b.data.tags.get(tags.ABLATION_ARM) not in tuning]


def _finetune_one(base_run_id: str, recipe, runs_dir: str) -> str:
    """One fine-tune in a worker process with one thread (cores are shared with the other workers)."""
    import torch

    from lit_modules.finetune import finetune

    torch.set_num_threads(1)
    return finetune(base_run_id, recipe, runs_dir, overrides=["trainer.num_threads=1"]).line()


def finetune_bases(spec: EvidenceSpec, args: EvidenceArgs, workers: int) -> int:
    """Fine-tune every finished base of the preset's grid that lacks this recipe's fine-tune; failures count."""
    from mlflow.tracking import MlflowClient

    from lit_modules.config.finetune_recipe import recipe_hash
    from lit_modules.runs.search import finished_finetune
    from lit_modules.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(None, args.runs_dir))
    recipe = load_recipe(spec.finetune, args.recipe_overrides)
    bases = finished_test_cells(client, spec)
    todo = [b.info.run_id for b in bases if finished_finetune(client, b, recipe_hash(recipe)) is None]
    print(f"[{spec.paper}] fine-tuning {len(todo)} of {len(bases)} base runs with recipe '{spec.finetune}' "
          f"({workers} workers x 1 thread)", flush=True)
    return each_in_workers(partial(_finetune_one, recipe=recipe, runs_dir=args.runs_dir), todo, workers, "fine-tune of")


def each_in_workers(job: Callable[[str], str], run_ids: list[str], workers: int, what: str) -> int:
    """`job(run_id)` for every run id in spawned worker processes, each finished one's line printed; the
    failures, counted (one failing run must not stop the others)."""
    failed = 0
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(job, run_id): run_id for run_id in run_ids}
        for future in as_completed(futures):
            try:
                print(f"  {future.result()}", flush=True)
            except Exception as err:  # noqa: BLE001 - reported and counted, the others go on
                print(f"  {what} {futures[future]} failed: {type(err).__name__}: {err}", file=sys.stderr)
                failed += 1
    return failed


def _evaluate_one(run_id: str, tasks: tuple[str, ...], runs_dir: str) -> str:
    """Score one fine-tuned model zero-shot in a worker process with one thread, into its own run."""
    import torch

    from lit_modules.evaluation.run_eval import evaluate_finished_run
    from lit_modules.runs.store import open_store

    torch.set_num_threads(1)
    outcome = evaluate_finished_run(run_id, {"tasks": list(tasks), "probe": False}, runs_dir)  # acc only
    open_store(runs_dir, None).set_tag(run_id, tags.FINETUNE_EVAL_TASKS, ",".join(tasks))
    accs = {k: v for k, v in outcome.metrics.items() if k.endswith("/acc")}
    return f"{run_id}: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(accs.items()))


def finetunes_to_score(client: MlflowClient, spec: EvidenceSpec,
                       recipe_overrides: dict[str, str]) -> tuple[list[str], int]:
    """(fine-tune run ids not yet scored on the spec's tasks, how many are) of the preset's finished grid."""
    from lit_modules.config.finetune_recipe import recipe_hash
    from lit_modules.runs.search import finished_finetune

    recipe_id = recipe_hash(load_recipe(spec.finetune, recipe_overrides))
    tuned = [finished_finetune(client, b, recipe_id) for b in finished_test_cells(client, spec)]
    wanted = ",".join(spec.finetune_eval)
    todo = [r.info.run_id for r in tuned if r is not None and r.data.tags.get(tags.FINETUNE_EVAL_TASKS) != wanted]
    return todo, sum(r is not None for r in tuned) - len(todo)


def evaluate_finetunes(spec: EvidenceSpec, args: EvidenceArgs, workers: int) -> int:
    """Score every fine-tuned model of the grid not yet scored on `finetune_eval`; failures count."""
    from mlflow.tracking import MlflowClient

    from lit_modules.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(None, args.runs_dir))
    todo, done = finetunes_to_score(client, spec, args.recipe_overrides)
    print(f"[{spec.paper}] scoring {len(todo)} of {len(todo) + done} fine-tuned models zero-shot on "
          f"{', '.join(spec.finetune_eval)} ({workers} workers x 1 thread)", flush=True)
    return each_in_workers(partial(_evaluate_one, tasks=spec.finetune_eval, runs_dir=args.runs_dir), todo, workers,
                           "scoring")
