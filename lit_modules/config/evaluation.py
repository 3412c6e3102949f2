"""Structured-config schema for the `eval` Hydra group: which zero-shot tasks to run and how.

Only plain field types, so OmegaConf can type-check YAML against it. `problems()` reports impossible
settings (and an unreachable hub when standard tasks are asked for) before any training starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from lit_modules.config.eval_tasks import (LOCAL_ALIAS, is_local_task, local_task_problem, split_tasks,
                                           unknown_task_sentence)

BOS_TOKENS = ("eos", "bos")
PRECISIONS = ("32-true", "bf16-mixed")
PROBE_LABELS = ("document", "speaker")


# The sampled-metric tasks evaluation/sampled.py knows; named here so the config check imports no evaluation.
SAMPLED_TASKS = ("arithmetic",)

@dataclass
class EvalConfig:
    # Empty: no evaluation. `local` = the three local tasks of the run's own corpus; `local_<kind>_<corpus>`
    # names one local task; any other name is an lm-eval task or group that needs the Hugging Face Hub.
    tasks: List[str] = field(default_factory=list)
    batch_size: int = 16  # sequences per forward; the scores are the same bits at any batch size (adapter.py)
    # Start every context with a document-start token. Our shards separate documents with EOS and never
    # contain BOS, so `eos` is the token a trained model has seen before a document starts.
    add_bos: bool = True
    bos_token: str = "eos"  # eos | bos
    limit: Optional[int] = None  # score only the first N items of each task (quick checks)
    num_fewshot: int = 0
    # Tokens of context the model sees (longer contexts are left-truncated). None: the length it was trained
    # on when the caller knows it (data.seq_len), else its max_seq_len. RoPE positions beyond the training
    # length are untrained, so scoring there makes a model look worse than it is.
    context_len: Optional[int] = None
    max_gen_toks: int = 256  # generate_until default when a task does not set its own
    device: str = "auto"  # auto (cuda when available) | cpu | cuda | cuda:N
    precision: str = "32-true"  # 32-true | bf16-mixed (autocast on GPU)
    bootstrap_iters: int = 0  # lm-eval stderr bootstraps; 0 keeps evaluation fast
    # Local tasks: built once per corpus from its held-out split with this seed, cached as JSONL.
    local_items: int = 300  # items per local task (cap)
    seed: int = 1234  # local task building and the probe's train/test split
    # Per-token log-probabilities on fixed held-out windows, for token-level comparisons between runs.
    save_token_logprobs: bool = True
    token_logprobs_windows: int = 64
    token_logprobs_seq_len: int = 128  # fixed (not the model's) so every run scores the same windows
    # Linear probes on hidden states (needs a model with `forward(idx, return_hidden=True)`).
    probe: bool = False
    probe_labels: str = "document"  # document: which held-out document; speaker: which speaker (plays)
    probe_passages: int = 400  # cap on probe passages
    hub_timeout_s: float = 3.0  # reachability probe before standard tasks
    # Sampled-generation metrics (lit_modules/evaluation/sampled.py): greedy Pass@1, Pass@k and Maj@k on
    # offline tasks with checkable answers (`arithmetic`). n samples per prompt (null: k) at `temperature`,
    # drawn with `seed`; `sampled_prompts` prompts per task.
    sampled: List[str] = field(default_factory=list)
    sampled_k: int = 4
    sampled_n: Optional[int] = None
    sampled_temperature: float = 0.8
    sampled_prompts: int = 32

    def problems(self, corpus_name: Optional[str] = None, check_hub: bool = True,
                 key: str = "eval.tasks") -> list[str]:
        """One sentence per impossible setting; `check_hub` also probes the Hub if standard tasks are set; `key`
        is the word that set the tasks (`tasks` for make eval), for the sentences that name it."""
        found = []
        if self.batch_size < 1:
            found.append(f"eval.batch_size is {self.batch_size} but must be at least 1.")
        if self.bos_token not in BOS_TOKENS:
            found.append(f"eval.bos_token is {self.bos_token!r} but must be one of {', '.join(BOS_TOKENS)}.")
        if self.limit is not None and self.limit < 1:
            found.append(f"eval.limit is {self.limit} but must be at least 1 (or null for all items).")
        if self.num_fewshot < 0:
            found.append(f"eval.num_fewshot is {self.num_fewshot} but must be >= 0.")
        if self.context_len is not None and self.context_len < 2:
            found.append(f"eval.context_len is {self.context_len} but must be at least 2 (or null).")
        if self.max_gen_toks < 1:
            found.append(f"eval.max_gen_toks is {self.max_gen_toks} but must be at least 1.")
        if not (self.device in ("auto", "cpu", "cuda", "mps") or self.device.startswith("cuda:")):
            found.append(f"eval.device is {self.device!r} but must be auto, cpu, cuda, cuda:N or mps.")
        if self.precision not in PRECISIONS:
            found.append(f"eval.precision is {self.precision!r} but must be one of {', '.join(PRECISIONS)}.")
        if self.bootstrap_iters < 0:
            found.append(f"eval.bootstrap_iters is {self.bootstrap_iters} but must be >= 0.")
        if not 10 <= self.local_items <= 100_000:
            found.append(f"eval.local_items is {self.local_items} but must lie between 10 and 100000.")
        if self.token_logprobs_windows < 1:
            found.append(
                f"eval.token_logprobs_windows is {self.token_logprobs_windows} but must be at least 1."
            )
        if self.token_logprobs_seq_len < 2:
            found.append(
                f"eval.token_logprobs_seq_len is {self.token_logprobs_seq_len} but must be at least 2."
            )
        if self.probe_labels not in PROBE_LABELS:
            found.append(
                f"eval.probe_labels is {self.probe_labels!r} but must be one of {', '.join(PROBE_LABELS)}."
            )
        if self.probe_passages < 20:
            found.append(f"eval.probe_passages is {self.probe_passages} but must be at least 20.")
        if self.hub_timeout_s <= 0:
            found.append(f"eval.hub_timeout_s is {self.hub_timeout_s} but must be positive.")
        found += self._sampled_problems()
        for name in self.tasks:
            if name != LOCAL_ALIAS and is_local_task(name):
                problem = local_task_problem(name) or _corpus_problem(name, corpus_name)
                if problem:
                    found.append(problem)
        _, standard = split_tasks(list(self.tasks), corpus_name or "<corpus>")
        if check_hub and standard:
            from lit_modules.config.eval_hub import hub_unreachable_sentence

            # A name lm-eval does not know is no hub problem: said first, with the names it does know.
            sentence = (unknown_task_sentence(standard, corpus_name, key)
                        or hub_unreachable_sentence(standard, corpus_name, self.hub_timeout_s, key))
            if sentence:
                found.append(sentence)
        return found

    def _sampled_problems(self) -> list[str]:

        found = [f"eval.sampled names unknown task {t!r}; choose from {', '.join(SAMPLED_TASKS)}." for t in self.sampled
                 if t not in SAMPLED_TASKS]
        n = self.sampled_n if self.sampled_n is not None else self.sampled_k
        if self.sampled_k < 1 or n < self.sampled_k:
            found.append(f"eval.sampled_k must be at least 1 and at most eval.sampled_n ({n}), got {self.sampled_k}.")
        if not self.sampled_temperature > 0:
            found.append(f"eval.sampled_temperature is {self.sampled_temperature} but must be positive.")
        if self.sampled_prompts < 1:
            found.append(f"eval.sampled_prompts is {self.sampled_prompts} but must be at least 1.")
        return found

    @classmethod
    def from_any(cls, cfg) -> EvalConfig:
        """Accept the dataclass, a DictConfig (e.g. `cfg.eval`), a mapping, or None (defaults)."""
        if isinstance(cfg, cls):
            return cfg
        if cfg is None:
            return cls()
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException

        from lit_modules.config.errors import EvalError

        try:
            merged = OmegaConf.merge(OmegaConf.structured(cls), cfg)
        except OmegaConfBaseException as err:
            raise EvalError(f"Bad eval setting: {str(err).splitlines()[0]}") from None
        return OmegaConf.to_object(merged)


def _corpus_problem(task: str, corpus_name: Optional[str]) -> Optional[str]:
    """A local task names a corpus that is neither the run's nor in conf/data: say so before training."""
    from lit_modules.config import files

    from lit_modules.config.eval_tasks import parse_local_task

    _, name = parse_local_task(task)
    if name == corpus_name or files.has_option("data", name):
        return None
    return f"eval task {task!r} names the corpus {name!r}, which is neither this run's corpus nor in conf/data."
