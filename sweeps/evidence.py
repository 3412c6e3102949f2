"""The evidence ledger's driver: run each paper's evidence protocol, export what it measured, report, ledger.

    python -m sweeps.evidence [papers=wisca,pc_layer,...] [stages=headline,below,scale] [workers=N] [runs_dir=runs]
                              [results_dir=results] [ledger=RESULTS.md] [run overrides for every cell]

For each paper, `conf/evidence/<paper>.yaml` names the run preset (`conf/experiment/evidence/<paper>.yaml`)
and the blocks of cells it runs (arms x seeds; headline arms get more seeds). A block belongs to a stage:
`headline` (the default: the tiny rung, which the primary verdicts rest on, at most 30 minutes on 2 cores),
`below` (the 0.25x rung, minutes) or `scale` (the 4x rung, the longest); with three rungs the report fits
each primary check's trend over model size; `stages=` picks which run, the headline alone unless told. Every block goes through
the ablation driver under ONE MLflow parent per preset, cells in parallel on this machine; cells already
FINISHED are skipped, so an interrupted `make evidence` is finished by running it again. A spec may name
a fine-tuning recipe: every finished base is then fine-tuned with it (in parallel, skipping done ones),
and with `finetune_eval: [tasks]` every fine-tuned model is then scored zero-shot on those lm-eval tasks
(`local` = the local tasks of the fine-tune's target corpus), into the fine-tune's own run
(sweeps/finetune_stage.py).
A spec may give its primary pairs learning-rate grids (`lr_tuning:`, sweeps/lr_tuning.py): each tuned arm's
rate is chosen on tuning seeds no block runs, before its stage's test cells run at that rate; and its
fine-tune a rate grid (`finetune_lr_tuning:`, sweeps/finetune_tuning.py): each arm's fine-tune rate is chosen
on bases pre-trained on tuning seeds, before its test bases are fine-tuned at it.
Then the grid is exported to `results/<paper>/` (CSV measurements + provenance), the report is written
there from those files alone, and `RESULTS.md` is regenerated from every `results/*/`.
Under `recipe=<size>` (a GPU recipe sets the model) only the headline runs, and a rung arm there (a CPU-ladder
model, `tpp140_wd0.3@x0.5`) runs as its family arm at the recipe's size, its checks and grids with it.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from omegaconf import OmegaConf

from analysis.lr_tuning import LrTuning
from lit_modules.config import files
from lit_modules.config.arguments import HYDRA, NAMES, POSITIVE_INT, Arg, Prefix, Verb, parse_words
from lit_modules.config.errors import ConfigError
from lit_modules.config.finetune_recipe import FinetuneRecipe
from sweeps import lr_tuning
from sweeps.finetune_stage import evaluate_finetunes, finetune_bases, tune_finetune_rates
from sweeps.finetune_tuning import load_base_recipe, parse_finetune_tuning, recipe_of_arm, tuning_blocks
from sweeps.wall_clock import WallClock

SPEC_DIR = files.group_dir("evidence")  # driver specs (a test points this at its own folder)
REPO = files.CONF_DIR.parent


# Run in this order: the primary pairs (at tiny, or at a smaller rung where a pair at tiny would not fit the
# headline's budget); the smaller rungs and secondary arms; the 4x rung.
STAGES = ("headline", "below", "scale")


@dataclass(frozen=True)
class Block:
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    stage: str = "headline"


@dataclass(frozen=True)
class EvidenceSpec:
    paper: str
    preset: str
    blocks: tuple[Block, ...]
    finetune: str | None = None
    finetune_eval: tuple[str, ...] = ()  # zero-shot tasks for every fine-tuned model (empty: none)
    checks: dict | None = None  # the declared families (analysis.families), hashed into the provenance
    lr_tuning: tuple[LrTuning, ...] = ()  # learning-rate grids of tuned arms (sweeps/lr_tuning.py)
    ablation_only: tuple[str, ...] = ()  # preset arms this protocol does not run (`make ablate` does), declared
    finetune_lr_tuning: LrTuning | None = None  # the fine-tune's rate grid (sweeps/finetune_tuning.py)

    def cells(self) -> int:
        return sum(len(b.arms) * len(b.seeds) for b in self.blocks)

    def cells_to_tune(self) -> int:
        return sum(len(t.arms) * len(t.grid) * len(t.tuning_seeds) for t in self.lr_tuning)

    def tuning_cells(self) -> set[str]:
        """The arm names of the tuning cells (`<arm>@lr<rate>`)."""
        return {t.cell_arm(a, r) for t in self.lr_tuning for a in t.arms for r in t.grid}

    def stage_tunings(self, stage: str) -> list[LrTuning]:
        return [t for t in self.lr_tuning if any(b.stage == stage and set(b.arms) & set(t.arms) for b in self.blocks)]

    def at_recipe_size(self, recipe: str) -> EvidenceSpec:
        """The protocol under `recipe=<size>`, which sets the model: a rung arm (`tpp140_wd0.3@x0.5`, a CPU-scale
        economy) runs as its trend family's arm at the recipe's size (`g8_origin@tpp1.3@x4` -> `g8_origin@tpp1.3`),
        and its checks and grids follow it."""
        from analysis.trend_report import trend_family  # pandas: not on the refusal path

        def mapped(arms) -> tuple[str, ...]:
            return tuple(trend_family(a) for a in arms)

        blocks = tuple(replace(b, arms=mapped(b.arms)) for b in self.blocks)
        cells = [(a, s) for b in blocks for a in b.arms for s in b.seeds]
        twice = sorted({f"`{a}` seed {s}" for a, s in cells if cells.count((a, s)) > 1})
        if twice:
            raise ConfigError(f"Under recipe={recipe} conf/evidence/{self.paper}.yaml's rung arms run as their family "
                              f"arms at the recipe's size, which would run {', '.join(twice)} twice.")
        checks = dict(self.checks or {})
        for part in ("primary", "added_after_data"):  # the parts that name arms (analysis.families)
            if isinstance(checks.get(part), list):
                checks[part] = [{**e, "arm": trend_family(str(e["arm"]))} if isinstance(e, dict) and "arm" in e else e
                                for e in checks[part]]
        ft = self.finetune_lr_tuning
        return replace(self, blocks=blocks, checks=checks or self.checks,
                       lr_tuning=tuple(replace(t, arms=mapped(t.arms)) for t in self.lr_tuning),
                       finetune_lr_tuning=replace(ft, arms=mapped(ft.arms)) if ft is not None else None)

    def in_stages(self, stages: list[str]) -> EvidenceSpec:
        """The same protocol with only the blocks (and tuning grids) of these stages, in stage order."""
        blocks = tuple(b for stage in STAGES if stage in stages for b in self.blocks if b.stage == stage)
        kept = {a for b in blocks for a in b.arms}
        ft = self.finetune_lr_tuning
        ft = replace(ft, arms=tuple(a for a in ft.arms if a in kept)) if ft is not None else None
        return replace(self, blocks=blocks, lr_tuning=tuple(t for t in self.lr_tuning if set(t.arms) & kept),
                       finetune_lr_tuning=ft if ft is not None and ft.arms else None)


def override_value(overrides: list[str], key: str) -> str | None:
    """The last `key=value` (or `+key=value`) among the run overrides; None where absent or null."""
    values = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").split("=", 1)[0] == key and "=" in o]
    return values[-1] if values and values[-1] not in ("null", "") else None


def recipe_named(overrides: list[str]) -> str | None:
    """The `recipe=<size>` among the run overrides, if any."""
    return override_value(overrides, "recipe")


def is_dry_run(overrides: list[str]) -> bool:
    return str(override_value(overrides, "dry_run")).lower() in ("true", "1", "yes")


@dataclass
class EvidenceArgs:
    papers: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=lambda: ["headline"])
    workers: int | None = None
    runs_dir: str = "runs"
    results_dir: str = "results"
    ledger: str = str(REPO / "RESULTS.md")
    recipe_overrides: dict[str, str] = field(default_factory=dict)  # finetune.<field>=value
    overrides: list[str] = field(default_factory=list)


def known_papers() -> list[str]:
    return sorted(p.stem for p in SPEC_DIR.glob("*.yaml"))


def load_spec(paper: str) -> EvidenceSpec:
    path = SPEC_DIR / f"{paper}.yaml"
    if not path.is_file():
        raise ConfigError(f"There is no evidence protocol '{paper}' in conf/evidence/ (known: {', '.join(known_papers())}).")
    raw = OmegaConf.to_container(OmegaConf.load(path))
    allowed = ("preset", "blocks", "finetune", "finetune_eval", "checks", "lr_tuning", "ablation_only",
               "finetune_lr_tuning")
    unknown = set(raw) - set(allowed)
    if unknown:
        raise ConfigError(f"conf/evidence/{paper}.yaml has unknown key(s) {', '.join(sorted(unknown))} "
                          f"(allowed: {', '.join(allowed)}).")
    tasks = raw.get("finetune_eval") or []
    if tasks and (not raw.get("finetune") or not isinstance(tasks, list)):
        raise ConfigError(f"conf/evidence/{paper}.yaml: finetune_eval is a list of tasks for the fine-tuned "
                          "models, so it needs a 'finetune' recipe.")
    blocks = []
    for i, block in enumerate(raw.get("blocks") or []):
        if not {"arms", "seeds"} <= set(block) <= {"arms", "seeds", "stage"} or not block["arms"] or not block["seeds"]:
            raise ConfigError(f"conf/evidence/{paper}.yaml block {i + 1} needs non-empty 'arms' and 'seeds' lists "
                              "(and may name a 'stage').")
        stage = str(block.get("stage", "headline"))
        if stage not in STAGES:
            raise ConfigError(f"conf/evidence/{paper}.yaml block {i + 1} has stage '{stage}'; "
                              f"the stages are {', '.join(STAGES)}.")
        blocks.append(Block(tuple(str(a) for a in block["arms"]), tuple(int(s) for s in block["seeds"]), stage))
    if not blocks or not raw.get("preset"):
        raise ConfigError(f"conf/evidence/{paper}.yaml must name a 'preset' and at least one block.")
    seen: dict[tuple[str, int], int] = {}
    for i, block in enumerate(blocks, 1):
        for cell in ((a, s) for a in block.arms for s in block.seeds):
            if seen.setdefault(cell, i) != i:  # a stage's blocks run as one launch, where a cell is run once
                raise ConfigError(f"conf/evidence/{paper}.yaml runs `{cell[0]}` seed {cell[1]} in blocks "
                                  f"{seen[cell]} and {i}; list each cell once.")
    tunings = lr_tuning.parse_lr_tuning(raw.get("lr_tuning"), f"conf/evidence/{paper}.yaml", tuple(blocks))
    ablation_only = tuple(str(a) for a in raw.get("ablation_only") or [])
    running = sorted(set(ablation_only) & {a for b in blocks for a in b.arms})
    if running:
        raise ConfigError(f"conf/evidence/{paper}.yaml lists {', '.join(running)} under ablation_only and in a block; "
                          "an arm either runs in the protocol or is left to `make ablate`.")
    ft_tuning = parse_finetune_tuning(raw.get("finetune_lr_tuning"), f"conf/evidence/{paper}.yaml", tuple(blocks),
                                      raw.get("finetune"))
    return EvidenceSpec(paper, str(raw["preset"]), tuple(blocks), raw.get("finetune"), tuple(str(t) for t in tasks),
                        raw.get("checks"), tunings, ablation_only, ft_tuning)


VERB = Verb(
    "evidence",
    {
        "papers": Arg(NAMES),
        "stages": Arg(NAMES, default=["headline"]),
        "workers": Arg(POSITIVE_INT),
        "runs_dir": Arg(default="runs", forward=True),  # every cell writes there too
        "results_dir": Arg(default="results"),
        "ledger": Arg(default=str(REPO / "RESULTS.md")),
    },
    aliases={"PAPERS": "papers", "STAGES": "stages"},
    prefixes={"finetune.": Prefix(tuple(f.name for f in fields(FinetuneRecipe)), "recipe field")},
    rest=HYDRA,  # run overrides for every cell
)


def parse_args(argv: list[str]) -> EvidenceArgs:
    words = parse_words(argv, VERB)
    unknown = [s for s in words["stages"] if s not in STAGES]
    if unknown:
        raise ConfigError(f"stages= names {', '.join(unknown)}; the stages are {', '.join(STAGES)}.")
    return EvidenceArgs(papers=words["papers"] or known_papers(), stages=list(words["stages"]), workers=words["workers"],
                        runs_dir=words["runs_dir"], results_dir=words["results_dir"], ledger=words["ledger"],
                        recipe_overrides=words.prefixed["finetune."], overrides=words.rest)


def block_argv(spec: EvidenceSpec, block: Block, args: EvidenceArgs) -> list[str]:
    """The ablation driver's arguments for one block (its arms x seeds join the preset's one parent)."""
    argv = [f"experiment={spec.preset}", f"arms={','.join(block.arms)}", f"seeds={','.join(map(str, block.seeds))}",
            "report=false", *args.overrides]
    if args.workers is not None:
        argv.append(f"workers={args.workers}")
    return argv


def check_all(specs: list[EvidenceSpec], args: EvidenceArgs) -> None:
    """Every block's arms exist and every cell composes and validates, before any paper runs."""
    from sweeps.ablate import parse_args as ablate_args
    from sweeps.ablate import read_grid, validate_cells

    for spec in specs:
        for block in spec.blocks:
            grid = ablate_args(block_argv(spec, block, args))
            read_grid(grid)
            validate_cells(grid)
        lr_tuning.check_cells(spec.lr_tuning, f"conf/evidence/{spec.paper}.yaml", args.overrides,
                              lambda arms, seeds, spec=spec: block_argv(spec, Block(arms, seeds), args))
        declared_checks(spec)  # the families name the claim's metrics and the protocol's arms
        if spec.finetune_lr_tuning is not None:
            for arms, seeds, extra in tuning_blocks(spec.finetune_lr_tuning):  # the tuning bases compose, validate
                grid = ablate_args(block_argv(spec, Block(arms, seeds), args) + extra)
                read_grid(grid)
                validate_cells(grid)
        if spec.finetune:
            recipe = load_base_recipe(spec.finetune, args.recipe_overrides, spec.finetune_lr_tuning)
            if spec.finetune_eval:
                from lit_modules.evaluation.run_eval import eval_config_for

                problems = eval_config_for(None, {"tasks": list(spec.finetune_eval)}).problems(recipe.data)
                if problems:
                    raise ConfigError(f"conf/evidence/{spec.paper}.yaml finetune_eval: {problems[0]}")


def declared_checks(spec: EvidenceSpec) -> dict:
    """The protocol's declared families (checked against its claim and arms), its seeds per block and its
    learning-rate grids: the provenance's record of what was declared when the cells ran, all in one hash
    (analysis.families), so a later change to a family, a seed or a grid shows."""
    from analysis.claims import claim_for
    from analysis.families import checks_sha256, declared_keys, parse_families, validate_against

    families = parse_families(spec.checks, f"conf/evidence/{spec.paper}.yaml")
    claim = claim_for(spec.paper)
    validate_against(families, claim, list(dict.fromkeys(a for b in spec.blocks for a in b.arms)))
    protocol = {"declared_seeds": [{"arms": list(b.arms), "seeds": list(b.seeds), "stage": b.stage} for b in spec.blocks],
                "lr_tuning": [t.record() for t in spec.lr_tuning]}
    if spec.finetune_lr_tuning is not None:  # only where declared: the other protocols' hashes stay as they ran
        protocol["finetune_lr_tuning"] = spec.finetune_lr_tuning.record()
    return {"checks_sha256": checks_sha256(families, claim, protocol), "checks_primary": declared_keys(families),
            **protocol}


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


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


def run_stage(spec: EvidenceSpec, stage: str, args: EvidenceArgs, run_together,
              chosen: dict[str, float]) -> tuple[int, int]:
    """One stage: its tuning cells (one launch) and each tuned arm's rate (added to `chosen`), then its blocks'
    test cells, a tuned arm's at its own rate (one launch: `run_together` is sweeps.ablate's); (a stop code or
    0, failures)."""
    tunings, failed = spec.stage_tunings(stage), 0
    if tunings:
        def run_cells(launches: list[lr_tuning.Launch]) -> int:
            return run_together([block_argv(spec, Block((arm,), seeds), args) + lr_tuning.tuning_overrides(tuning, arm, rates)
                                 for tuning, arm, rates, seeds in launches])

        code, picked, undecided = lr_tuning.tune(spec.paper, tunings, args.runs_dir, spec.preset, run_cells)
        if code:
            return code, failed
        chosen.update(picked)
        failed += len(undecided)
    tuned = {a: t.key for t in tunings for a in t.arms}
    argvs = [block_argv(spec, replace(block, arms=arms), args) + extra
             for block in spec.blocks if block.stage == stage
             for arms, extra in lr_tuning.block_calls(block, tuned, chosen)]
    if argvs:
        code = run_together(argvs)
        if code == 2 or code > 128:  # refused, or stopped by a signal (the cells were stopped with it)
            return code, failed
        failed += code != 0
    return 0, failed


def run_paper(spec: EvidenceSpec, args: EvidenceArgs, command: str) -> int:
    from sweeps.ablate import run_together

    declared = declared_checks(spec)  # hashed before any cell runs
    clock = WallClock(args.runs_dir, spec.paper)
    started = time.time()
    before = finished_work(spec, args.runs_dir)
    if before == (0, 0, 0):
        clock.reset()  # a grid with nothing finished: earlier calls' time measured nothing that is kept
    tuning = f" (and {spec.cells_to_tune()} tuning cells)" if spec.lr_tuning else ""
    print(f"[{spec.paper}] {spec.cells()} cells in {len(spec.blocks)} blocks{tuning} of preset {spec.preset} "
          f"(stages {', '.join(args.stages)})", flush=True)
    failed, chosen, chosen_ft = 0, {}, {}
    try:
        for stage in STAGES:
            blocks = [b for b in spec.blocks if b.stage == stage]
            stage_started = time.time()
            code, failures = run_stage(spec, stage, args, run_together, chosen)
            if code:
                return code
            failed += failures
            if blocks:
                print(f"[{spec.paper}] stage {stage}: {sum(len(b.arms) * len(b.seeds) for b in blocks)} cells, "
                      f"{(time.time() - stage_started) / 60:.1f} min", flush=True)
        if spec.finetune:
            workers = args.workers or default_workers()
            recipe = load_base_recipe(spec.finetune, args.recipe_overrides, spec.finetune_lr_tuning)

            def run_cells(blocks: list[tuple[tuple[str, ...], tuple[int, ...], list[str]]]) -> int:
                return run_together([block_argv(spec, Block(arms, seeds), args) + extra for arms, seeds, extra in blocks])

            code, chosen_ft, failures = tune_finetune_rates(spec, args, workers, recipe, run_cells)
            if code:
                return code
            failed += failures
            recipe_of = recipe_of_arm(recipe, spec.finetune_lr_tuning, chosen_ft)
            failed += finetune_bases(spec, args, workers, recipe_of)
            if spec.finetune_eval:
                failed += evaluate_finetunes(spec, args, workers, recipe_of)
    finally:
        wall = time.time() - started
        if finished_work(spec, args.runs_dir) != before:
            clock.add(wall)
    from analysis.load_runs import RunStore
    from analysis.provenance import provenance_record, read_provenance
    from analysis.report import export_results

    store = RunStore(args.runs_dir)
    folder = Path(args.results_dir) / spec.paper
    provenance = read_provenance(folder)
    if provenance is None or finished_work(spec, args.runs_dir) != before:
        # New measurements: the record's wall time is every call's that ran cells of this grid. A call that
        # only re-exports keeps the record of the calls that ran the cells.
        provenance = {**provenance_record(command, clock.total(), args.workers or default_workers(), threads_per_worker=1),
                      **declared, **({"lr_tuning_chosen": chosen} if spec.lr_tuning else {}),
                      **({"finetune_lr_tuning_chosen": chosen_ft} if spec.finetune_lr_tuning else {})}
    out = export_results(store.resolve(spec.preset).info.run_id, folder,
                         runs_dir=args.runs_dir, store=store, provenance=provenance)
    print(f"[{spec.paper}] report: {out} ({wall / 60:.1f} min)", flush=True)
    return 1 if failed else 0


def at_recipe(specs: list[EvidenceSpec], args: EvidenceArgs) -> list[EvidenceSpec]:
    """The protocols as they run under the run overrides' `recipe=<size>` (unchanged without one): the headline
    only, at the recipe's size, into a store, results and ledger of their own."""
    recipe = recipe_named(args.overrides)
    if recipe is None:
        return specs
    others = [s for s in args.stages if s != "headline"]
    if others:
        raise ConfigError(f"stages={','.join(others)} run the CPU ladder's other model sizes (0.25x to 4x of tiny); "
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


if __name__ == "__main__":
    sys.exit(main())
