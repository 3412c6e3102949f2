"""Sampled-generation metrics (greedy Pass@1, Pass@k, Maj@k) through lm-eval's generate_until on our adapter.

    metrics = sampled_metrics(lm, "arithmetic", SampledConfig(k=4, n=8, temperature=0.8, prompts=32))
    # eval/arithmetic/greedy_pass_at_1, eval/arithmetic/pass_at_1, .../pass_at_4, .../maj_at_4

For each prompt: one greedy generation (temperature 0) and n sampled ones (`do_sample`, `temperature`);
an answer is the first integer of a generation, correct when it equals the reference.
- greedy_pass_at_1: share of prompts whose greedy answer is correct.
- pass_at_k: the unbiased estimator of Chen et al. 2021 (Codex), averaged over prompts, with c correct of n
  samples: 1 - C(n - c, k) / C(n, k), computed as a product so large n does not overflow.
- maj_at_k: share of prompts whose most frequent answer among the first k samples is correct (ties go to
  the answer seen first; unparsable generations do not vote).
MLflow metric names cannot hold '@', so Pass@k is `pass_at_<k>`.

The task `arithmetic` is offline and checkable: "a+b=" prompts with a, b drawn from a seeded RNG, after two
fixed worked examples, stopped at a newline. A tiny model scores about 0 on it; the numbers are for
comparing fine-tunes that learn it (the pipeline, not the task, is the point here).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

from lm_eval.api.instance import Instance

from lit_modules.config.evaluation import SAMPLED_TASKS, EvalConfig

TASKS = SAMPLED_TASKS  # the names the eval config accepts (config/evaluation.py)
FEWSHOT = "3+4=7\n12+5=17\n"
_INTEGER = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Prompt:
    context: str
    answer: str


@dataclass(frozen=True)
class SampledConfig:
    k: int = 4
    n: Optional[int] = None  # samples per prompt; None = k
    temperature: float = 0.8
    prompts: int = 32
    seed: int = 0  # the prompts' draws (the samples' seed is the adapter's)
    max_gen_toks: int = 6

    @classmethod
    def of(cls, cfg: EvalConfig) -> SampledConfig:
        """The sampled metrics' settings of an eval config (eval.sampled_*)."""
        return cls(k=cfg.sampled_k, n=cfg.sampled_n, temperature=cfg.sampled_temperature,
                   prompts=cfg.sampled_prompts, seed=cfg.seed)

    @property
    def samples(self) -> int:
        return self.n if self.n is not None else self.k


def arithmetic_prompts(count: int, seed: int = 0) -> list[Prompt]:
    rng = random.Random(f"{seed}:arithmetic")
    pairs = [(rng.randrange(50), rng.randrange(50)) for _ in range(count)]
    return [Prompt(f"{FEWSHOT}{a}+{b}=", str(a + b)) for a, b in pairs]


def task_prompts(task: str, count: int, seed: int) -> list[Prompt]:
    if task not in TASKS:
        raise ValueError(f"unknown sampled task {task!r}; choose from {', '.join(TASKS)}")
    return arithmetic_prompts(count, seed)


def parse_answer(generation: str) -> Optional[str]:
    found = _INTEGER.search(generation)
    return found.group(0) if found else None


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al. 2021: P(at least one of k draws without replacement from n samples, c correct, is correct)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):  # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
        miss *= 1.0 - k / i
    return 1.0 - miss


def majority_correct(answers: Sequence[Optional[str]], reference: str) -> bool:
    votes = Counter(a for a in answers if a is not None)  # insertion order breaks ties: first seen wins
    return bool(votes) and votes.most_common(1)[0][0] == reference


def _requests(prompts: Sequence[Prompt], repeats: int, gen_kwargs: dict) -> list[Instance]:
    return [
        Instance("generate_until", doc={"answer": p.answer}, arguments=(p.context, dict(gen_kwargs)), idx=i,
                 repeats=repeats)
        for i, p in enumerate(prompts)
        for _ in range(repeats)
    ]


def sampled_metrics(lm, task: str, cfg: SampledConfig) -> dict[str, float]:
    """Greedy Pass@1, Pass@1 and Pass@k (unbiased, from n samples) and Maj@k of `lm` on `task`."""
    if not 1 <= cfg.k <= cfg.samples:
        raise ValueError(f"sampled metrics need 1 <= k <= n, got k={cfg.k}, n={cfg.samples}")
    prompts = task_prompts(task, cfg.prompts, cfg.seed)
    stop = {"until": ["\n"], "max_gen_toks": cfg.max_gen_toks}
    greedy = lm.generate_until(_requests(prompts, 1, {**stop, "do_sample": False, "temperature": 0.0}))
    sampling = {**stop, "do_sample": True, "temperature": cfg.temperature}
    sampled = lm.generate_until(_requests(prompts, cfg.samples, sampling))
    n = cfg.samples
    greedy_hits = pass1 = passk = majk = 0.0
    for i, prompt in enumerate(prompts):
        answers = [parse_answer(text) for text in sampled[i * n : (i + 1) * n]]
        correct = sum(a == prompt.answer for a in answers)
        greedy_hits += parse_answer(greedy[i]) == prompt.answer
        pass1 += pass_at_k(n, correct, 1)
        passk += pass_at_k(n, correct, cfg.k)
        majk += majority_correct(answers[: cfg.k], prompt.answer)
    count = len(prompts)
    prefix = f"eval/{task}"
    return {
        f"{prefix}/greedy_pass_at_1": greedy_hits / count,
        f"{prefix}/pass_at_1": pass1 / count,
        f"{prefix}/pass_at_{cfg.k}": passk / count,
        f"{prefix}/maj_at_{cfg.k}": majk / count,
    }
