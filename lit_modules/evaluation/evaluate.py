"""Evaluate a live model: lm-eval tasks, per-token log-probabilities and linear probes, in one call.

    outcome = evaluate_run(model, tokenizer, corpus, EvalConfig(tasks=["local"]), out_dir)
    outcome.metrics    # {"eval/local_cloze_shakespeare/acc": 0.31, ...}
    outcome.artifacts  # lm_eval_results.json, samples/<task>.jsonl, token_logprobs.npz, probe.json

Nothing here logs to MLflow (see `tracking.log_outcome`), so it runs the same at the end of training,
on a finished run's checkpoint, or from a notebook.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from torch import nn

from lit_modules.config.errors import EvalError
from lit_modules.config.eval_tasks import parse_local_task, split_tasks
from lit_modules.config.evaluation import EvalConfig
from lit_modules.data.corpus import Corpus
from lit_modules.data.documents import iter_documents

from .adapter import LiveLM, model_max_seq_len

RESULTS_FILE = "lm_eval_results.json"
SAMPLES_DIR = "samples"
PROBE_FILE = "probe.json"


@dataclass
class EvalOutcome:
    metrics: dict[str, float]
    artifacts: list[Path]
    out_dir: Optional[Path] = None
    settings: dict[str, Any] = field(default_factory=dict)  # what the scores depend on (logged as tags)


def context_length(model: nn.Module, cfg: EvalConfig, train_seq_len: Optional[int] = None) -> int:
    """eval.context_len, else the training length, else the model's max_seq_len; never above the latter."""
    limit = model_max_seq_len(model)
    return min(limit, cfg.context_len or train_seq_len or limit)


def build_adapter(
    model: nn.Module, tokenizer, cfg: EvalConfig, train_seq_len: Optional[int] = None
) -> LiveLM:
    return LiveLM(
        model,
        tokenizer,
        batch_size=cfg.batch_size,
        add_bos=cfg.add_bos,
        bos_token=cfg.bos_token,
        max_seq_len=context_length(model, cfg, train_seq_len),
        device=cfg.device,
        precision=cfg.precision,
        max_gen_toks=cfg.max_gen_toks,
        seed=cfg.seed,
    )


def evaluate_run(
    model: nn.Module,
    tokenizer,
    corpus: Corpus,
    cfg: EvalConfig | Any,
    out_dir: Path,
    train_seq_len: Optional[int] = None,
    heldout_tokens: Optional[np.ndarray] = None,
) -> EvalOutcome:
    """Run what `cfg` asks for; nothing when it lists no tasks and no probe.

    `train_seq_len` (data.seq_len) bounds the context unless eval.context_len is set; `heldout_tokens`
    (the held-out token shard) is read from the corpus' shards when not given.
    Raises EvalError (one sentence) for impossible settings, an unreachable Hub, or unusable text.
    """
    cfg = EvalConfig.from_any(cfg)
    problems = cfg.problems(corpus.name if corpus is not None else None)  # None: SFT data, sampled tasks only
    if problems:
        raise EvalError(problems[0])
    out_dir = Path(out_dir)
    if not cfg.tasks and not cfg.probe and not cfg.sampled:
        return EvalOutcome({}, [], out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    lm = build_adapter(model, tokenizer, cfg, train_seq_len)
    settings = {
        **lm.settings(),
        "lm_eval_version": _lm_eval_version(),
        "num_fewshot": cfg.num_fewshot,
        "limit": cfg.limit,
        "seed": cfg.seed,
    }
    metrics: dict[str, float] = {}
    artifacts: list[Path] = []

    if cfg.tasks and cfg.save_token_logprobs:  # first, so its settings reach the results file
        artifacts.append(
            _token_logprobs(model, tokenizer, corpus, cfg, lm, out_dir, heldout_tokens, settings)
        )
    local, standard = split_tasks(list(cfg.tasks), corpus.name) if cfg.tasks else ([], [])
    if local or standard:
        task_metrics, task_artifacts = _run_tasks(lm, local, standard, corpus, cfg, out_dir, settings)
        metrics.update(task_metrics)
        artifacts += task_artifacts
    for task in cfg.sampled:
        from .sampled import SampledConfig, sampled_metrics

        metrics.update(sampled_metrics(lm, task, SampledConfig.of(cfg)))
    if cfg.probe:
        probe_metrics, probe_path = _probe(model, tokenizer, corpus, cfg, lm, out_dir)
        metrics.update(probe_metrics)
        artifacts.append(probe_path)
    metrics["eval/seconds"] = time.perf_counter() - started
    return EvalOutcome(metrics, artifacts, out_dir, settings)


def _lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


@contextlib.contextmanager
def _global_rng_preserved():
    """lm-eval reseeds Python, NumPy and torch; the caller's random streams continue as if it had not."""
    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.random.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def corpus_for_task(task: str, corpus: Corpus) -> Corpus:
    """The run's own corpus, or another embedded corpus prepared with its `conf/data/<name>.yaml` settings."""
    _, name = parse_local_task(task)
    if name == corpus.name:
        return corpus
    from omegaconf import OmegaConf

    from lit_modules.config import files
    from lit_modules.data import DataConfig, prepare_corpus

    if not files.has_option("data", name):
        raise EvalError(
            f"Local task {task} names the corpus {name!r}, "
            "which is neither this run's corpus nor in conf/data."
        )
    data_cfg = files.load_option("data", name, DataConfig)
    data_cfg.cache_dir = str(corpus.cache_dir)
    return prepare_corpus(OmegaConf.to_object(data_cfg))


def _run_tasks(lm, local, standard, corpus, cfg, out_dir, settings) -> tuple[dict[str, float], list[Path]]:
    from lit_modules.config.eval_hub import local_only
    from .results import flat_metrics, write_results, write_samples
    from .task_files import prepare_local_tasks

    folders, manifests = [], {}
    for task in local:
        task_corpus = corpus_for_task(task, corpus)
        folder, manifest = prepare_local_tasks(task_corpus, cfg.local_items, cfg.seed)
        if folder not in folders:
            folders.append(folder)
        manifests[task] = {"folder": str(folder), **manifest["tasks"][task]}
    offline = local_only() if not standard else contextlib.nullcontext()
    with offline, _global_rng_preserved():
        from lm_eval import simple_evaluate
        from lm_eval.tasks import TaskManager

        manager = TaskManager(include_path=[str(f) for f in folders] or None, include_defaults=bool(standard))
        results = simple_evaluate(
            model=lm,
            tasks=local + standard,
            task_manager=manager,
            num_fewshot=cfg.num_fewshot,  # explicit, so a task's own few-shot default never applies
            limit=cfg.limit,
            bootstrap_iters=cfg.bootstrap_iters,
            log_samples=True,
            batch_size=cfg.batch_size,
            device=str(lm.device),
            random_seed=cfg.seed,
        )
    sample_paths = write_samples(results, out_dir / SAMPLES_DIR)
    results_path = write_results(results, out_dir / RESULTS_FILE, {**settings, "local_tasks": manifests})
    return flat_metrics(results), [results_path, *sample_paths]


def _token_logprobs(model, tokenizer, corpus, cfg, lm, out_dir, heldout_tokens, settings) -> Path:
    from .token_logprobs import ARTIFACT_NAME, compute_token_logprobs, save_token_logprobs

    if heldout_tokens is None:
        from lit_modules.data import prepare_shards

        heldout_tokens = prepare_shards(corpus, tokenizer).heldout_tokens()
    seq_len = min(cfg.token_logprobs_seq_len, lm.max_seq_len)
    tokens, logprobs = compute_token_logprobs(
        model, heldout_tokens, seq_len, cfg.token_logprobs_windows, lm.device, cfg.batch_size
    )
    settings["token_logprobs"] = {"seq_len": seq_len, "windows": len(tokens) // seq_len}
    return save_token_logprobs(out_dir / ARTIFACT_NAME, tokens, logprobs)


def _probe(model, tokenizer, corpus, cfg, lm, out_dir) -> tuple[dict[str, float], Path]:
    from .probes import run_probes

    result = run_probes(
        model,
        tokenizer,
        list(iter_documents(corpus.heldout_path)),
        labels=cfg.probe_labels,
        seq_len=min(128, lm.max_seq_len),
        max_passages=cfg.probe_passages,
        seed=cfg.seed,
        device=str(lm.device),
        batch_size=cfg.batch_size,
    )
    path = out_dir / PROBE_FILE
    path.write_text(json.dumps(result.__dict__, indent=2) + "\n", encoding="utf-8")
    return result.metrics(), path
