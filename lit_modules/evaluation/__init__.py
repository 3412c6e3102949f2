"""Zero-shot evaluation of the live model through lm-eval, local offline tasks, token log-probs, probes.

    from lit_modules.evaluation import EvalConfig, evaluate_run
    outcome = evaluate_run(model, tokenizer, corpus, EvalConfig(tasks=["local"], probe=True), out_dir)

Command line, on a finished run (results go into that run):
    python -m lit_modules.evaluation.run_eval run=<mlflow run id> [tasks=a,b] [runs_dir=runs]

Exports are lazy: importing lm-eval costs seconds and config validation does not need it.
"""

from lit_modules.config.errors import EvalError
from lit_modules.config.evaluation import EvalConfig

_LAZY = {
    "EvalOutcome": "evaluate",
    "evaluate_run": "evaluate",
    "LiveLM": "adapter",
    "compute_token_logprobs": "token_logprobs",
    "run_probes": "probes",
    "ProbeResult": "probes",
    "prepare_local_tasks": "task_files",
    "log_outcome": "tracking",
    "evaluate_finished_run": "run_eval",
    "bench_adapter": "bench",
    "hub_unreachable_sentence": "hub",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [  # noqa: RUF022 - grouped as above
    "EvalConfig",
    "EvalError",
    "EvalOutcome",
    "evaluate_run",
    "LiveLM",
    "compute_token_logprobs",
    "run_probes",
    "ProbeResult",
    "prepare_local_tasks",
    "log_outcome",
    "evaluate_finished_run",
    "bench_adapter",
    "hub_unreachable_sentence",
]
