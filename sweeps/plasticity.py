"""Weight decay vs plasticity in one command: pre-train a lambda x regime x seed grid, fine-tune every base
with one fixed recipe, and tabulate base loss against plasticity.

    python -m sweeps.plasticity [experiment=wd_plasticity] [runs_dir=runs] [reports_dir=reports]
                                [finetune=python_docs] [finetune.<field>=value ...] [probes=true|false]
                                [pretrain=true|false] [launcher=local_parallel] [pre-training overrides ...]

(a) the pre-training grid runs through `sweeps.ablate.main` (one MLflow parent; cells already FINISHED are
    skipped on a rerun); `pretrain=false` goes straight to (b) on the newest parent of the preset;
(b) every FINISHED child of that parent without a FINISHED fine-tune under this recipe is fine-tuned
    (`lit_modules.finetune`) and probed (`lit_modules.evaluation.probe_runs`: per-layer accuracy on the base
    corpus's held-out documents, logged on the base run as `eval/probe/...`);
(c) the table (`analysis.plasticity`, from the grid read as an `Ablation`): per (regime, lambda) mean +/- sd
    over seeds of the base val/loss, the target loss before and after fine-tuning, plasticity, the
    train-validation gap and the attention pseudo-rank, written as Markdown and CSV to
    `<reports_dir>/<experiment>/plasticity/` (also logged on the parent run), then the ablation report.

Any other key=value goes to the pre-training grid (e.g. `seed=0`, `trainer.max_steps=20` for a smoke run).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields

from mlflow.entities import Run
from mlflow.tracking import MlflowClient

from lit_modules.config.arguments import FLAG, HYDRA, Arg, Prefix, Verb, parse_words
from lit_modules.config.errors import ConfigError
from lit_modules.config.finetune_recipe import DEFAULT_RECIPE, FinetuneRecipe, load_recipe, recipe_family, recipe_hash
from lit_modules.runs import tags
from lit_modules.runs.search import ABLATION, find_parent, finished_finetune, grid_bases
from lit_modules.tracking.store import tracking_uri
from lit_modules.runs.uri_masking import mask_password


@dataclass
class PipelineArgs:
    experiment: str = "wd_plasticity"
    runs_dir: str = "runs"
    reports_dir: str | None = None
    recipe: str = DEFAULT_RECIPE
    recipe_overrides: dict[str, str] = field(default_factory=dict)
    probes: bool = True
    pretrain: bool = True
    grid_argv: list[str] = field(default_factory=list)  # passed to sweeps.ablate.main besides experiment=


VERB = Verb(
    "plasticity",
    {
        "experiment": Arg(default=PipelineArgs.experiment),
        "runs_dir": Arg(default=PipelineArgs.runs_dir, forward=True),  # the grid's cells write there too
        "reports_dir": Arg(),
        "finetune": Arg(default=DEFAULT_RECIPE),
        "probes": Arg(FLAG, default=True),
        "pretrain": Arg(FLAG, default=True),
    },
    prefixes={"finetune.": Prefix(tuple(f.name for f in fields(FinetuneRecipe)), "recipe field")},
    rest=HYDRA,  # pre-training overrides for every cell
)


def parse_args(argv: list[str]) -> PipelineArgs:
    words = parse_words(argv, VERB)
    return PipelineArgs(experiment=words["experiment"], runs_dir=words["runs_dir"],
                        reports_dir=words["reports_dir"], recipe=words["finetune"],
                        recipe_overrides=words.prefixed["finetune."], probes=words["probes"],
                        pretrain=words["pretrain"], grid_argv=words.rest)


def finetune_all(client: MlflowClient, bases: list[Run], recipe: FinetuneRecipe, runs_dir: str) -> int:
    """Fine-tune every base lacking a FINISHED fine-tune under this recipe; returns how many failed."""
    from lit_modules.finetune import finetune

    failed = 0
    todo = [b for b in bases if finished_finetune(client, b, recipe_hash(recipe)) is None]
    print(f"fine-tuning {len(todo)} of {len(bases)} base runs with recipe '{recipe.name}'")
    for base in todo:
        label = f"{base.data.tags.get(tags.ABLATION_ARM, '?')} seed {base.data.tags.get(tags.SEED, '?')}"
        try:
            result = finetune(base.info.run_id, recipe, runs_dir, client=client)
            print(f"  {label}: {result.line()}")
            failed += result.status not in ("FINISHED", "SKIPPED")
        except Exception as err:  # noqa: BLE001 - one failing base must not stop the others
            reason = str(err).splitlines()[0] if str(err) else ""
            print(f"  {label}: fine-tune failed: {type(err).__name__}: {reason}", file=sys.stderr)
            failed += 1
    return failed


def write_table(client: MlflowClient, parent: Run, args: PipelineArgs, recipe: FinetuneRecipe,
                notes: list[str]) -> str:
    """The plasticity table of the grid under this recipe, written under the reports folder and logged on
    the parent run; returns its text."""
    from analysis.load_runs import RunStore
    from analysis.plasticity import plasticity_tables, render, write_outputs
    from analysis.sections import reports_root
    from analysis.store_ablation import load_ablation

    ab = load_ablation(RunStore(args.runs_dir, client=client), client.get_run(parent.info.run_id))
    table = plasticity_tables(ab, recipe_family(recipe))[0]
    text = render(args.experiment, table, notes)
    path = write_outputs(reports_root(args.reports_dir) / args.experiment / "plasticity", text, table.summary,
                         table.rows)
    client.log_artifacts(parent.info.run_id, str(path.parent), artifact_path="plasticity")
    print(text)
    print(f"table: {path} (+ summary.csv, runs.csv); grid parent {parent.info.run_id}")
    return text


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        recipe = load_recipe(args.recipe, args.recipe_overrides)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    code = 0
    if args.pretrain:
        from sweeps.ablate import main as ablate

        code = ablate([f"experiment={args.experiment}", *args.grid_argv])
        if code == 2:
            return 2
    client = MlflowClient(tracking_uri(None, args.runs_dir))
    parent = find_parent(client, args.experiment, kinds=(ABLATION,))
    if parent is None:
        print(f"error: no pre-training grid of '{args.experiment}' in {mask_password(client.tracking_uri)}; "
              "run without pretrain=false first.", file=sys.stderr)
        return 2
    bases = grid_bases(client, parent)
    if not bases:
        print(f"error: the grid parent {parent.info.run_id} has no FINISHED pre-training run to fine-tune.",
              file=sys.stderr)
        return 1
    failed = finetune_all(client, bases, recipe, args.runs_dir)
    if args.probes:
        from lit_modules.evaluation.probe_runs import probe_finished_runs

        notes = [probe_finished_runs(client, [b.info.run_id for b in bases])]
    else:
        notes = ["linear probes skipped (probes=false)"]
    print(notes[0])
    write_table(client, parent, args, recipe, notes)
    try:  # the ablation report again, now that fine-tune and probe metrics exist
        from analysis.report import write_report

        report = write_report(parent_run_id=parent.info.run_id, runs_dir=args.runs_dir,
                              reports_dir=args.reports_dir)
        print(f"report: {report}")
    except Exception as err:  # noqa: BLE001 - the table is this command's product; the report is extra
        print(f"ablation report not refreshed: {type(err).__name__}: {err}", file=sys.stderr)
    return 1 if (code or failed) else 0


if __name__ == "__main__":
    sys.exit(main())
