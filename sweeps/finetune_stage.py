"""The evidence protocol's fine-tune stage: every finished test cell fine-tuned with the protocol's recipe,
then each fine-tuned model scored zero-shot on `finetune_eval`, both in spawned workers, skipping done ones.

    code, chosen, undecided = tune_finetune_rates(spec, args, workers, recipe, run_bases)  # finetune_lr_tuning
    recipe_of = recipe_of_arm(recipe, spec.finetune_lr_tuning, chosen)   # arm -> its recipe (None: no rate)
    failed = finetune_bases(spec, args, workers, recipe_of, relaunch)  # the grid's bases that lack their recipe's
    failed += evaluate_finetunes(spec, args, workers, recipe_of)  # the fine-tunes not yet scored on the tasks

A learning-rate tuning cell (`<arm>@lr<rate>` on a tuning seed, sweeps/lr_tuning.py) and a fine-tune tuning
base (`<arm>@ft_tuning`, sweeps/finetune_tuning.py) are no test bases: they chose a rate, the test cells carry
the claim. A base restored from the committed export has no checkpoint: one that still needs a fine-tune is
trained again first (sweeps/evidence/retrain.py). sweeps/evidence/stages.py runs the stages in order.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from multiprocessing import get_context
from typing import TYPE_CHECKING

from lit_modules.config.finetune_recipe import FinetuneRecipe
from lit_modules.runs import tags
from sweeps.finetune_tuning import choose, tuning_jobs

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient

    from sweeps.evidence.args import EvidenceArgs
    from sweeps.evidence.spec import EvidenceSpec

RecipeOf = Callable[[str], "FinetuneRecipe | None"]  # a test base's arm -> its recipe (None: its arm got no rate)


def grid_cells(client: MlflowClient, spec: EvidenceSpec) -> list[Run]:
    """Every finished cell of the preset's grid, tuning cells and tuning bases included (oldest first)."""
    from lit_modules.runs.search import ABLATION, find_parent, grid_bases

    parent = find_parent(client, spec.preset, kinds=(ABLATION,))
    return grid_bases(client, parent) if parent is not None else []


def finished_test_cells(client: MlflowClient, spec: EvidenceSpec) -> list[Run]:
    """The finished test cells of this call's blocks in the preset's grid: LR tuning cells, fine-tune tuning
    bases and the test cells of stages this call does not run left out (a stage-subset call fine-tunes only its
    own stages' cells, whose arms have their fine-tune rates in this call)."""
    tested = {a for b in spec.blocks for a in b.arms}
    return [b for b in grid_cells(client, spec) if b.data.tags.get(tags.ABLATION_ARM) in tested]


def _finetune_one(job: tuple[str, FinetuneRecipe], runs_dir: str) -> str:
    """One fine-tune (base run id, recipe) in a worker process with one thread (cores are shared)."""
    import torch

    from lit_modules.finetune import finetune

    torch.set_num_threads(1)
    base_run_id, recipe = job
    return finetune(base_run_id, recipe, runs_dir, overrides=["trainer.num_threads=1"]).line()


def run_finetunes(jobs: list[tuple[str, FinetuneRecipe]], runs_dir: str, workers: int) -> int:
    jobs, refused = with_checkpoints(jobs, runs_dir, "fine-tune")
    return refused + each_in_workers(partial(_finetune_one, runs_dir=runs_dir), jobs, workers, "fine-tune of")


def with_checkpoints(items: list, runs_dir: str, what: str) -> tuple[list, int]:
    """The items (a run id, or a tuple whose first entry is one) whose run this store trained, and the count of
    the others: runs restored from the committed export (sweeps/evidence/restore.py), which holds no
    checkpoint to start a `what` from, left so because training them again did not finish
    (sweeps/evidence/retrain.py); each is said in one line and counts as failed."""
    from mlflow.tracking import MlflowClient

    from lit_modules.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(None, runs_dir))
    kept, refused = [], 0
    for item in items:
        run_id = item[0] if isinstance(item, tuple) else item
        run = client.get_run(run_id)
        if tags.RESTORED_FROM not in run.data.tags:
            kept.append(item)
            continue
        refused += 1
        print(f"  {what} of {run.info.run_name} refused: the run was restored from the committed export, which "
              "keeps no checkpoint, and its cell did not finish when trained again", file=sys.stderr)
    return kept, refused


def tune_finetune_rates(spec: EvidenceSpec, args: EvidenceArgs, workers: int, recipe: FinetuneRecipe,
                        run_bases: Callable[[], int]) -> tuple[int, dict[str, float], int]:
    """With `finetune_lr_tuning`: pre-train the tuning bases (`run_bases`: every arm's in one launch, an exit
    code), fine-tune each at every grid rate, choose each arm's rate; (a stop code or 0, arm -> rate, failures:
    failed fine-tunes and arms left without a rate)."""
    from mlflow.tracking import MlflowClient

    from lit_modules.tracking.store import tracking_uri
    from sweeps.evidence.retrain import restored, retrain

    tuning = spec.finetune_lr_tuning
    if tuning is None:
        return 0, {}, 0
    code = run_bases()
    if code == 2 or code > 128:  # refused, or stopped by a signal; a failed base is judged by the choice
        return code, {}, 0
    client = MlflowClient(tracking_uri(None, args.runs_dir))
    jobs = tuning_jobs(client, grid_cells(client, spec), tuning, recipe)
    if (stale := restored([client.get_run(i) for i in dict.fromkeys(base for base, _ in jobs)])):
        code = retrain(client, stale, run_bases, "fine-tune tuning bases")
        if code == 2 or code > 128:
            return code, {}, 0
        jobs = tuning_jobs(client, grid_cells(client, spec), tuning, recipe)
    print(f"[{spec.paper}] fine-tune rate tuning over {', '.join(map(str, sorted(tuning.grid)))} on the bases of "
          f"seeds {', '.join(map(str, tuning.tuning_seeds))}: {len(jobs)} fine-tunes to run", flush=True)
    failed = run_finetunes(jobs, args.runs_dir, workers)
    chosen, undecided = choose(spec.paper, tuning, client, grid_cells(client, spec))
    return 0, chosen, failed + len(undecided)


def finetune_bases(spec: EvidenceSpec, args: EvidenceArgs, workers: int, recipe_of: RecipeOf,
                   relaunch: Callable[[], int]) -> int:
    """Fine-tune every finished test base whose arm has a recipe and lacks its fine-tune; failures count. A base
    restored from the committed export that still needs its fine-tune (or its fine-tune's scoring) is trained
    again first through `relaunch` (the call's test cells; finished ones skip themselves)."""
    from mlflow.tracking import MlflowClient

    from lit_modules.tracking.store import tracking_uri
    from sweeps.evidence.retrain import restored, retrain

    client = MlflowClient(tracking_uri(None, args.runs_dir))
    retrain(client, restored(_unfinished_bases(client, spec, recipe_of)), relaunch, "test bases")
    bases = finished_test_cells(client, spec)
    jobs = [(b.info.run_id, recipe) for b in bases if (recipe := recipe_of(b.data.tags.get(tags.ABLATION_ARM, "")))
            is not None and _finetune_of(client, b, recipe) is None]
    print(f"[{spec.paper}] fine-tuning {len(jobs)} of {len(bases)} base runs with recipe '{spec.finetune}' "
          f"({workers} workers x 1 thread)", flush=True)
    return run_finetunes(jobs, args.runs_dir, workers)


def _finetune_of(client: MlflowClient, base: Run, recipe: FinetuneRecipe) -> Run | None:
    from lit_modules.config.finetune_recipe import recipe_hash
    from lit_modules.runs.search import finished_finetune

    return finished_finetune(client, base, recipe_hash(recipe))


def _unfinished_bases(client: MlflowClient, spec: EvidenceSpec, recipe_of: RecipeOf) -> list[Run]:
    """The finished test bases whose arm has a recipe and that lack their fine-tune, or (with `finetune_eval`)
    whose fine-tune is not yet scored on its tasks."""
    wanted, todo = ",".join(spec.finetune_eval), []
    for base in finished_test_cells(client, spec):
        recipe = recipe_of(base.data.tags.get(tags.ABLATION_ARM, ""))
        if recipe is None:
            continue
        tuned = _finetune_of(client, base, recipe)
        if tuned is None or (spec.finetune_eval and tuned.data.tags.get(tags.FINETUNE_EVAL_TASKS) != wanted):
            todo.append(base)
    return todo


def each_in_workers(job: Callable, items: list, workers: int, what: str) -> int:
    """`job(item)` for every item (a run id, or a tuple whose first entry is one) in spawned worker processes,
    each finished one's line printed; the failures, counted (one failing run must not stop the others).
    Interrupted (Ctrl-C, SIGINT), no further item starts, the running ones end, and KeyboardInterrupt goes on up
    (the driver records its time and stops; the same command resumes): a pool left to itself would run every
    queued item before the stop took effect."""
    failed = 0
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        futures = {pool.submit(job, item): item for item in items}
        for future in as_completed(futures):
            try:
                print(f"  {future.result()}", flush=True)
            except Exception as err:  # noqa: BLE001 - reported and counted, the others go on
                item = futures[future]
                print(f"  {what} {item[0] if isinstance(item, tuple) else item} failed: {type(err).__name__}: {err}",
                      file=sys.stderr)
                failed += 1
    except KeyboardInterrupt:
        print(f"stopping: no further {what.split()[0]} starts; the running ones end first", file=sys.stderr, flush=True)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
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


def finetunes_to_score(client: MlflowClient, spec: EvidenceSpec, recipe_of: RecipeOf) -> tuple[list[str], int]:
    """(fine-tune run ids not yet scored on the spec's tasks, how many are) of the preset's finished test bases."""
    from lit_modules.config.finetune_recipe import recipe_hash
    from lit_modules.runs.search import finished_finetune

    tuned = [finished_finetune(client, b, recipe_hash(recipe)) for b in finished_test_cells(client, spec)
             if (recipe := recipe_of(b.data.tags.get(tags.ABLATION_ARM, ""))) is not None]
    wanted = ",".join(spec.finetune_eval)
    todo = [r.info.run_id for r in tuned if r is not None and r.data.tags.get(tags.FINETUNE_EVAL_TASKS) != wanted]
    return todo, sum(r is not None for r in tuned) - len(todo)


def evaluate_finetunes(spec: EvidenceSpec, args: EvidenceArgs, workers: int, recipe_of: RecipeOf) -> int:
    """Score every fine-tuned test base of the grid not yet scored on `finetune_eval`; failures count."""
    from mlflow.tracking import MlflowClient

    from lit_modules.tracking.store import tracking_uri

    client = MlflowClient(tracking_uri(None, args.runs_dir))
    todo, done = finetunes_to_score(client, spec, recipe_of)
    print(f"[{spec.paper}] scoring {len(todo)} of {len(todo) + done} fine-tuned models zero-shot on "
          f"{', '.join(spec.finetune_eval)} ({workers} workers x 1 thread)", flush=True)
    todo, refused = with_checkpoints(todo, args.runs_dir, "scoring")
    return refused + each_in_workers(partial(_evaluate_one, tasks=spec.finetune_eval, runs_dir=args.runs_dir), todo,
                                     workers, "scoring")
