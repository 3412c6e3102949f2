"""Evaluate a finished run's checkpoint and write the results into that same MLflow run.

    python -m lit_modules.evaluation.run_eval run=<mlflow run id> [tasks=a,b] [runs_dir=runs] [probe=true] ...

Any `EvalConfig` field can be set as key=value (`tasks` takes a comma-separated list). Settings start from
the run's own recorded `eval` config when it has one; with no tasks anywhere, the run's local tasks run.
The model is rebuilt from the run's recorded config, its weights loaded from `last.ckpt`, and every
technique's `prepare_for_inference` applied (e.g. the PC layer merges its weights), as after training.
Relative paths in the recorded config (the data cache) resolve against the working directory, as in training.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lit_modules.tracking.uri_masking import keep_off_stdout, mask_password

from .config import EvalConfig
from .errors import EvalError

CLI_KEYS = ("run", "runs_dir", "tracking_uri")


@dataclass
class LoadedRun:
    run_id: str
    model: Any
    tokenizer: Any
    corpus: Any
    config: Any  # the run's resolved DictConfig
    eval_config: Optional[dict]  # the run's recorded `eval` node, if any
    step: int


def open_client(runs_dir: str = "runs", tracking_uri: Optional[str] = None):
    """MlflowClient on the run store; refuses to create an empty store where none exists."""
    import os

    from mlflow.tracking import MlflowClient

    uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    if not uri:
        db = Path(runs_dir).resolve() / "mlflow.db"
        if not db.is_file():
            raise EvalError(
                f"There is no MLflow store at {db}; pass runs_dir=<the folder the run was trained in>."
            )
        uri = f"sqlite:///{db}"
    return MlflowClient(keep_off_stdout(uri))


def load_run(client, run_id: str) -> LoadedRun:
    """Rebuild a finished run's model (weights from its last checkpoint), tokenizer and corpus."""
    import torch
    from omegaconf import OmegaConf

    from lit_modules.build import build_model, build_techniques
    from lit_modules.config.schema import Config
    from lit_modules.data import build_tokenizer, prepare_corpus
    from lit_modules.resume import CHECKPOINT_DIR_TAG, CONFIG_SIDECAR

    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - any lookup failure means the same thing to the user
        raise EvalError(f"run={run_id} is not a run in the MLflow store {mask_password(client.tracking_uri)}.") from None
    directory = run.data.tags.get(CHECKPOINT_DIR_TAG)
    checkpoint = Path(directory or "") / "last.ckpt"
    sidecar = Path(directory or "") / CONFIG_SIDECAR
    if not directory or not checkpoint.is_file() or not sidecar.is_file():
        raise EvalError(
            f"MLflow run {run_id} has no checkpoint to evaluate "
            f"(looked for last.ckpt and {CONFIG_SIDECAR} in {directory})."
        )
    recorded = dict(json.loads(sidecar.read_text())["config"])
    eval_node = recorded.get("eval")
    if "eval" not in {f.name for f in dataclasses.fields(Config)}:
        recorded.pop("eval", None)  # written by a schema that knows `eval`, read by one that does not
    cfg = OmegaConf.merge(OmegaConf.structured(Config), recorded)
    techniques = build_techniques(cfg)
    model, _ = build_model(cfg, techniques)
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    weights = {k[len("model.") :]: v for k, v in state["state_dict"].items() if k.startswith("model.")}
    model.load_state_dict(weights)
    for technique in techniques:
        prepare = getattr(technique, "prepare_for_inference", None)
        if callable(prepare):
            model = prepare(model)
    corpus = prepare_corpus(OmegaConf.to_object(cfg.data))
    tokenizer = build_tokenizer(OmegaConf.to_object(cfg.tokenizer), corpus)
    return LoadedRun(run_id, model, tokenizer, corpus, cfg, eval_node, int(state.get("global_step", 0)))


def parse_args(argv: list[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """(run keys, EvalConfig overrides) from key=value words."""
    field_names = {f.name for f in dataclasses.fields(EvalConfig)}
    run_keys, overrides = {}, {}
    for word in argv:
        key, sep, value = word.partition("=")
        if not sep:
            raise EvalError(f"Arguments are key=value words; {word!r} has no '='.")
        if key in CLI_KEYS:
            run_keys[key] = value
        elif key == "tasks":
            overrides["tasks"] = [t.strip() for t in value.strip("[]").split(",") if t.strip()]
        elif key in field_names:
            overrides[key] = value
        else:
            raise EvalError(
                f"Unknown argument {key!r}; use run=, runs_dir=, tracking_uri= "
                f"or an eval setting ({', '.join(sorted(field_names))})."
            )
    if not run_keys.get("run"):
        raise EvalError("Say which run to evaluate: run=<MLflow run id>.")
    return run_keys, overrides


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
    """Load, evaluate and log into the same run; returns the EvalOutcome (the CLI, callable from Python)."""
    from .evaluate import evaluate_run
    from .tracking import ARTIFACT_PATH, log_outcome

    client = open_client(runs_dir, tracking_uri)
    loaded = load_run(client, run_id)
    cfg = eval_config_for(loaded.eval_config, overrides or {})
    problems = cfg.problems(loaded.corpus.name)
    if problems:
        raise EvalError(problems[0])
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
    from lit_modules.data.errors import DataError

    try:
        run_keys, overrides = parse_args(sys.argv[1:] if argv is None else argv)
        outcome = evaluate_finished_run(
            run_keys["run"], overrides, run_keys.get("runs_dir", "runs"), run_keys.get("tracking_uri")
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
