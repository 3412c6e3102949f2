"""Evaluate a finished run's checkpoint and write the results into that same MLflow run.

    python -m lit_modules.evaluation.run_eval run=<mlflow run id> [tasks=a,b] [runs_dir=runs] [probe=true] ...

Any `EvalConfig` field can be set as key=value (`tasks` takes a comma-separated list). Settings start from
the run's own recorded `eval` config when it has one; with no tasks anywhere, the run's local tasks run.
The model is rebuilt from the run's recorded config, its weights loaded from `last.ckpt` (refused, exit 2,
when it does not match its checksum), and every technique's `prepare_for_inference` applied (e.g. the PC
layer merges its weights), as after training (lit_modules.runs.finished).
Relative paths in the recorded config (the data cache) resolve against the working directory, as in training.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from lit_modules.config.arguments import NAMES, TEXT, Arg, Verb, parse_words
from lit_modules.config.errors import EvalError
from lit_modules.config.evaluation import EvalConfig

RUN_ARGS = {
    "run": Arg(required="Say which run to evaluate: run=<MLflow run id>."),
    "runs_dir": Arg(default="runs"),
    "tracking_uri": Arg(),
}
# Every EvalConfig field is a word too (tasks and sampled as comma-separated lists); OmegaConf types the rest.
VERB = Verb("evaluate", {
    **RUN_ARGS,
    **{f.name: Arg(NAMES if f.name in ("tasks", "sampled") else TEXT) for f in dataclasses.fields(EvalConfig)},
})


def parse_args(argv: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """(run keys, EvalConfig overrides) from key=value words."""
    words = parse_words(argv, VERB)
    run_keys = {k: words[k] for k in RUN_ARGS}
    overrides = {k: words[k] for k in words.given if k not in RUN_ARGS}
    return run_keys, overrides


def refuse_unknown_task_words(overrides: dict[str, Any]) -> None:
    """`tasks=` names lm-eval does not know, or a malformed local task: EvalError before anything is read."""
    from lit_modules.config.eval_tasks import (LOCAL_ALIAS, is_local_task, local_task_problem, split_tasks,
                                               unknown_task_sentence)

    tasks = list(overrides.get("tasks") or [])
    for name in tasks:
        problem = local_task_problem(name) if is_local_task(name) and name != LOCAL_ALIAS else None
        if problem:
            raise EvalError(problem)
    _, standard = split_tasks(tasks, "<corpus>")
    sentence = unknown_task_sentence(standard, key=f"tasks={','.join(tasks)}")
    if sentence:
        raise EvalError(sentence)


def eval_config_for(recorded: Optional[dict], overrides: dict[str, Any]) -> EvalConfig:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        merged = OmegaConf.merge(OmegaConf.structured(EvalConfig), recorded or {}, overrides)
    except OmegaConfBaseException as err:
        raise EvalError(f"Bad eval setting: {str(err).splitlines()[0]}") from None
    cfg = OmegaConf.to_object(merged)
    if not cfg.tasks:  # evaluating a finished run with no task named anywhere: its own local tasks
        cfg.tasks = ["local"]
    return cfg


def evaluate_finished_run(
    run_id: str,
    overrides: Optional[dict[str, Any]] = None,
    runs_dir: str = "runs",
    tracking_uri: Optional[str] = None,
):
    """Load, evaluate and log into the same run; returns the EvalOutcome (the CLI, callable from Python).
    Every check comes before the model, lm-eval and Lightning load: the task names the words give, then
    the run and the settings it ends up with."""
    from lit_modules.runs.finished import config_on_schema, finished_run
    from lit_modules.runs.store import open_store

    refuse_unknown_task_words(overrides or {})
    client = open_store(runs_dir, tracking_uri)
    run = finished_run(client, run_id, key="run")
    cfg = eval_config_for(run.config.get("eval"), overrides or {})
    key = "tasks" if "tasks" in (overrides or {}) else "eval.tasks"  # the word that set them, for the sentence
    problems = cfg.problems(config_on_schema(run.config).data.name, key=key)
    if problems:
        raise EvalError(problems[0])
    from .evaluate import evaluate_run
    from .tracking import ARTIFACT_PATH, log_outcome

    from lit_modules.rebuild import inference_view

    loaded = inference_view(run)
    with tempfile.TemporaryDirectory(prefix="eval-") as tmp:
        outcome = evaluate_run(
            loaded.model,
            loaded.tokenizer,
            loaded.corpus,
            cfg,
            Path(tmp),
            train_seq_len=loaded.config.data.seq_len,
        )
        log_outcome(client, run_id, outcome, step=loaded.step)
        # The files now live in the run's artifacts; report them by their path there.
        outcome.artifacts = [Path(ARTIFACT_PATH) / p.relative_to(tmp) for p in outcome.artifacts]
    outcome.out_dir = None
    return outcome


def main(argv: Optional[list[str]] = None) -> int:
    from lit_modules.config.errors import ConfigError
    from lit_modules.errors import DataError
    from lit_modules.steady_heap import steady_heap

    steady_heap()  # as a training run has it: the forwards reuse their freed activations
    try:
        run_keys, overrides = parse_args(sys.argv[1:] if argv is None else argv)
        outcome = evaluate_finished_run(
            run_keys["run"], overrides, run_keys["runs_dir"], run_keys["tracking_uri"]
        )
    except (EvalError, ConfigError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for name, value in sorted(outcome.metrics.items()):
        print(f"{name:60s} {value:.4f}")
    print(f"logged {len(outcome.metrics)} metrics and the eval/ artifacts into run {run_keys['run']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
