"""The evidence ledger's driver: run each paper's protocol, export what it measured, report, ledger.

For each paper, `conf/evidence/<paper>.yaml` (docs/evidence.md) declares its arms, rungs, blocks of cells,
learning-rate grids, checks and budgets; every cell starts from its run preset (`preset:`). Every cell of
every paper is composed and validated first (`dry_run=true` stops there). Then each paper's stages run in
order (sweeps/evidence/stages.py) under ONE MLflow parent per preset, cells in parallel on this machine;
cells already FINISHED are skipped, so an interrupted `make evidence` is finished by running it again. The
grid is exported to `results/<paper>/` (CSV measurements + provenance), the report is written there from
those files alone, and `RESULTS.md` is regenerated from every `results/*/`.
Under `recipe=<size>` (a GPU recipe sets the model) only the headline runs, and a cell at a rung runs as its
arm at the recipe's size, its checks and grids with it.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

from lit_modules.config.errors import ConfigError
from sweeps.evidence.args import EvidenceArgs, default_workers, is_dry_run, parse_args, recipe_named
from sweeps.evidence.declared import declared_checks
from sweeps.evidence.plan import check_all, control_rates
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.spec import EvidenceSpec
from sweeps.evidence.stages import Stopped, run_stages
from sweeps.wall_clock import WallClock


COVERED = "finished_work"  # the provenance's [finished cells, fine-tunes, scored fine-tunes] when exported


def finished_work(spec: EvidenceSpec, runs_dir: str) -> tuple[int, int, int]:
    """(finished cells, finished fine-tunes, scored fine-tunes) of the preset's grid, tuning ones included:
    what a call has added."""
    from mlflow.tracking import MlflowClient

    from lit_modules.runs import tags
    from lit_modules.runs.search import ABLATION, find_parent, grid_bases
    from lit_modules.tracking.store import resolve_tracking_uri

    uri = resolve_tracking_uri(None, runs_dir)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return 0, 0, 0  # a fresh store: nothing done yet (and nothing created by asking)
    client = MlflowClient(uri)
    parent = find_parent(client, spec.preset, kinds=(ABLATION,))
    if parent is None:
        return 0, 0, 0
    finetunes = client.search_runs([parent.info.experiment_id], max_results=10_000, filter_string=(
        f"tags.`{tags.FINETUNE_GRID_PARENT}` = '{parent.info.run_id}' and attributes.status = 'FINISHED'"))
    scored = sum(tags.FINETUNE_EVAL_TASKS in r.data.tags for r in finetunes)
    return len(grid_bases(client, parent)), len(finetunes), scored


def run_paper(spec: EvidenceSpec, args: EvidenceArgs, command: str) -> int:
    from sweeps.ablate import run_together

    declared = declared_checks(spec)  # hashed before any cell runs
    clock = WallClock(args.runs_dir, spec.paper)
    folder = Path(args.results_dir) / spec.paper
    restored = restore(spec, args, folder, declared, clock)
    started = time.time()
    before = finished_work(spec, args.runs_dir)
    if args.export_only and before == (0, 0, 0):
        print(f"error: export_only=true: the store in {args.runs_dir} holds no finished cell of {spec.preset}, so "
              f"there is nothing to export ({folder} is left as it is).", file=sys.stderr)
        return 2
    if before == (0, 0, 0):
        clock.reset()  # a grid with nothing finished: earlier calls' time measured nothing that is kept
    tuning = f" (and {spec.cells_to_tune()} tuning cells)" if spec.lr_tuning else ""
    print(f"[{spec.paper}] {spec.cells()} cells in {len(spec.blocks)} blocks{tuning} of preset {spec.preset} "
          f"(stages {', '.join(args.stages)})", flush=True)
    chosen: dict[str, float] = {}
    chosen_ft: dict[str, float] = {}
    try:
        failed = 0 if args.export_only else run_stages(spec, args, run_together, chosen, chosen_ft)
    except Stopped as stop:
        return stop.code
    finally:
        wall = time.time() - started
        if finished_work(spec, args.runs_dir) != before:
            clock.add(wall)
    from analysis.load_runs import RunStore
    from analysis.provenance import provenance_record, read_provenance
    from analysis.report import exploratory_lines, export_results

    store = RunStore(args.runs_dir)
    earlier = read_provenance(folder)
    work = list(finished_work(spec, args.runs_dir))
    # A record covers the work it was exported with: a call that finished cells, or that finds cells an earlier
    # call finished but never exported (it crashed after them), writes a fresh one. Its wall time is every
    # call's that ran cells of this grid. What restore brought back is the export's own work.
    measured = earlier is None or (earlier.get(COVERED) != work and not (restored and tuple(work) == before))
    fresh = {**provenance_record(command, clock.total(), args.workers or default_workers(), threads_per_worker=1),
             COVERED: work} if measured else None
    provenance = next_record(earlier, declared, fresh, {
        "lr_tuning_chosen": chosen if spec.lr_tuning else None,
        "rate_of_chosen": control_rates(spec, chosen) or None,
        "finetune_lr_tuning_chosen": chosen_ft if spec.finetune_lr_tuning else None}) | {COVERED: work}
    out = export_results(store.resolve(spec.preset).info.run_id, folder,
                         runs_dir=args.runs_dir, store=store, provenance=provenance)
    print(f"[{spec.paper}] report: {out} ({wall / 60:.1f} min)", flush=True)
    for line in exploratory_lines(folder):  # a primary check that is not evidence yet says so here too
        print(f"[{spec.paper}] {line}", flush=True)
    return 1 if failed else 0


def restore(spec: EvidenceSpec, args: EvidenceArgs, folder: Path, declared: dict, clock: WallClock) -> bool:
    """Seed the store from the paper's committed export of this declaration (sweeps/evidence/restore.py): the
    cells a call on another machine, or before a fresh clone, finished are not run again, and the record's
    wall time goes on from the export's. True when it restored anything."""
    from lit_modules.config.composition import compose_run_config
    from sweeps.evidence.restore import restore_export

    experiment = compose_run_config([f"experiment={spec.preset}"]).logger.experiment
    restored = restore_export(spec.preset, args.runs_dir, folder, declared["checks_sha256"], experiment)
    if restored is None:
        return False
    clock.add(max(0.0, restored.wall_time_s - clock.total()))  # the export's calls ran on another store
    finetunes = f" and {restored.finetunes} fine-tunes" if restored.finetunes else ""
    print(f"[{spec.paper}] restored {restored.runs} runs{finetunes} from {folder / 'data'} (the committed export of "
          "this declaration) into the store: their cells are not run again", flush=True)
    return True


def next_record(earlier: dict | None, declared: dict, fresh: dict | None, choices: dict[str, dict | None]) -> dict:
    """The provenance an evidence call exports with. `fresh`: this call's run record when the earlier record does
    not cover the store's finished work (it ran cells, or an earlier call ran some and never exported them; None
    otherwise); `choices`: the rates it chose (with_choices).
    - Fresh: the fresh record and today's declaration, with the choices earlier calls made under the same
      declaration for stages this call did not run.
    - Nothing new, same declaration: the record of the calls that ran the cells stays; the protocol file as it is
      now describes them (a cell it changed would have run again), so its bytes' hash and checks node are today's.
    - Nothing new, another declaration: the earlier record as it was (its cells ran under it)."""
    same = earlier is not None and earlier.get("checks_sha256") == declared["checks_sha256"]
    if fresh is not None or earlier is None:
        return with_choices({**(fresh or {}), **declared}, earlier if same else None, choices)
    if same:
        today = {k: declared[k] for k in ("protocol_sha256", "checks") if k in declared}
        return with_choices({**earlier, **today}, earlier, choices)
    return earlier


def with_choices(record: dict, earlier: dict | None, now: dict[str, dict | None]) -> dict:
    """`record` with each of this call's choice maps (`now`: key -> map, None where it chose none) joined to the
    earlier record's (pass it only when it declared what this call declares): a call that runs some stages keeps
    what earlier calls chose for the other stages' grids, and its own choices win where both chose."""
    out = dict(record)
    for key, chosen in now.items():
        before = (earlier or {}).get(key) or {}
        if chosen is not None or before:
            out[key] = {**before, **(chosen or {})}
    return out


def at_recipe(specs: list[EvidenceSpec], args: EvidenceArgs) -> list[EvidenceSpec]:
    """The protocols as they run under the run overrides' `recipe=<size>` (unchanged without one): the headline
    only, at the recipe's size, into a store, results and ledger of their own."""
    recipe = recipe_named(args.overrides)
    if recipe is None:
        return specs
    others = [s for s in args.stages if s != "headline"]
    if others:
        raise ConfigError(f"stages={','.join(others)} run the CPU ladder's other model sizes (the protocol's rungs); "
                          f"recipe={recipe} sets one size, so run stages=headline under it (each recipe is its own "
                          "evidence run; no trend is fitted across recipes).")
    defaults = EvidenceArgs()
    shared = [f"{k}=" for k in ("runs_dir", "results_dir", "ledger") if getattr(args, k) == getattr(defaults, k)]
    if shared:
        raise ConfigError(f"recipe={recipe} makes GPU-scale evidence: give it {', '.join(shared)} of its own (the "
                          "defaults hold the CPU-scale ledger, which its cells would join and its export overwrite).")
    return [s.at_recipe_size(recipe) for s in specs]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_args(argv)
        specs = [load_spec(p).in_stages(args.stages) for p in args.papers]
        specs = at_recipe(specs, args)
        check_all(specs, args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if is_dry_run(args.overrides):
        # Every cell composed and validated above; launching would open a parent run in the store, and the
        # export would replace the results folder and the ledger with a report of no runs.
        for spec in specs:
            tuning = f" and {spec.cells_to_tune()} tuning cells" if spec.lr_tuning else ""
            print(f"[{spec.paper}] dry run: {spec.cells()} cells{tuning} in stage(s) {', '.join(args.stages)} compose "
                  f"and validate; nothing ran, no store opened, {args.results_dir}/ and {args.ledger} untouched")
        return 0
    command = shlex.join(["python", "-m", "sweeps.evidence", *argv])
    codes = []
    for spec in specs:
        if not spec.blocks:
            print(f"[{spec.paper}] has no cells in stage(s) {', '.join(args.stages)}; skipped", flush=True)
            continue
        try:
            code = run_paper(spec, args, command)
        except KeyboardInterrupt:  # in a fine-tune stage (an ablation's stop comes back as 128 + signal)
            print(f"[{spec.paper}] stopped by SIGINT: the same command resumes (finished work is skipped)",
                  file=sys.stderr)
            return 130
        if code == 2 or code > 128:
            return code
        codes.append(code)
    from analysis.ledger import write_ledger

    print(f"ledger: {write_ledger(args.results_dir, args.ledger)}")
    return 1 if any(codes) else 0
