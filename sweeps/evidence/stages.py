"""A protocol's stages, in order: each stage's tuning cells then its test cells, then the fine-tune stage.

    failed = run_stages(spec, args, run, chosen, chosen_ft)   # run: sweeps.ablate.run_together (grids -> code)

A stage (`headline`, `below`, `scale`) runs its learning-rate tuning cells in one launch, reads each tuned
arm's rate from the store (sweeps/lr_tuning.py), then runs its blocks' test cells in one launch, a tuned arm's
at its own rate. With a `finetune` recipe every finished test base is then fine-tuned (at its arm's tuned
rate under `finetune_lr_tuning`) and, with `finetune_eval`, scored zero-shot (sweeps/finetune_stage.py). A
stage's time is printed beside its declared budget.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from sweeps import lr_tuning
from sweeps.evidence import plan
from sweeps.evidence.args import EvidenceArgs, default_workers
from sweeps.evidence.spec import STAGES, EvidenceSpec, stage_cells
from sweeps.finetune_stage import evaluate_finetunes, finetune_bases, tune_finetune_rates
from sweeps.finetune_tuning import load_base_recipe, recipe_of_arm

RunGrids = Callable[[list], int]  # sweeps.ablate.run_together: grids -> 0, 1 (a cell failed), 2, 128 + signal


class Stopped(Exception):
    """A launch was refused (2) or stopped by a signal (128 + signal): the protocol stops with its code."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def _launch(spec: EvidenceSpec, cells: list[plan.Cell], args: EvidenceArgs, run: RunGrids) -> int:
    """The cells in one launch; its code (0 or 1), Stopped for a refusal or a signal."""
    if not cells:
        return 0
    code = run(plan.launch_grids(spec, cells, args))
    if code == 2 or code > 128:
        raise Stopped(code)
    return code


def run_stage(spec: EvidenceSpec, stage: str, args: EvidenceArgs, run: RunGrids, chosen: dict[str, float]) -> int:
    """One stage's tuning cells (each tuned arm's rate added to `chosen`) then its test cells; failures."""
    tunings, failed = spec.stage_tunings(stage), 0
    if tunings:
        def run_tuning(launches: list[lr_tuning.Launch]) -> int:
            return _launch_code(spec, plan.lr_tuning_cells(spec, launches), args, run)

        code, picked, undecided = lr_tuning.tune(spec.paper, tunings, args.runs_dir, spec.preset, run_tuning)
        if code:
            raise Stopped(code)
        chosen.update(picked)
        failed += len(undecided)
    blocks = [b for b in spec.blocks if b.stage == stage]
    return failed + (_launch(spec, plan.block_cells(spec, blocks, chosen), args, run) != 0)


def run_stages(spec: EvidenceSpec, args: EvidenceArgs, run: RunGrids, chosen: dict[str, float],
               chosen_ft: dict[str, float]) -> int:
    """Every stage in order, then the fine-tune stage; the failures (cells, undecided arms, fine-tunes).
    `chosen` and `chosen_ft` receive the tuned rates as they are chosen. Stopped on a refusal or a signal."""
    failed, started = 0, time.time()
    for stage in STAGES:
        blocks = [b for b in spec.blocks if b.stage == stage]
        stage_started = time.time()
        failed += run_stage(spec, stage, args, run, chosen)
        if blocks:
            _against_budget(spec, stage, f"stage {stage}: {stage_cells(blocks)} cells", stage_started)
    if spec.finetune:
        failed += _finetune_stage(spec, args, run, chosen, chosen_ft)
    if "all" in spec.budgets:
        _against_budget(spec, "all", "all stages run", started)
    return failed


def _against_budget(spec: EvidenceSpec, part: str, what: str, started: float) -> None:
    """`what`'s minutes, beside the protocol's budget for `part` (a stage or "all"); over it, said on stderr."""
    minutes, budget = (time.time() - started) / 60, spec.budgets.get(part)
    print(f"[{spec.paper}] {what}, {minutes:.1f} min" + (f" (budget {budget:g} min)" if budget else ""), flush=True)
    if budget and minutes > budget:
        print(f"[{spec.paper}] {what} took {minutes:.1f} min, over the {budget:g} minutes {spec.where} budgets "
              "for it", file=sys.stderr, flush=True)


def _finetune_stage(spec: EvidenceSpec, args: EvidenceArgs, run: RunGrids, chosen: dict[str, float],
                    chosen_ft: dict[str, float]) -> int:
    workers = args.workers or default_workers()
    recipe = load_base_recipe(spec.finetune, args.recipe_overrides, spec.finetune_lr_tuning)
    code, picked, failed = tune_finetune_rates(
        spec, args, workers, recipe, lambda: _launch_code(spec, plan.finetune_tuning_bases(spec, chosen), args, run))
    if code:
        raise Stopped(code)
    chosen_ft.update(picked)
    recipe_of = recipe_of_arm(recipe, spec.finetune_lr_tuning, picked)
    failed += finetune_bases(spec, args, workers, recipe_of,
                             lambda: _launch(spec, plan.block_cells(spec, spec.blocks, chosen), args, run))
    if spec.finetune_eval:
        failed += evaluate_finetunes(spec, args, workers, recipe_of)
    return failed


def _launch_code(spec: EvidenceSpec, cells: list[plan.Cell], args: EvidenceArgs, run: RunGrids) -> int:
    try:
        return _launch(spec, cells, args, run)
    except Stopped as stop:
        return stop.code
