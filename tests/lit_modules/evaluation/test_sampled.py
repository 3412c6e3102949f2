"""Sampled metrics: Pass@k (Chen et al. 2021's unbiased estimator) and Maj@k on known cases, seeded sampling
in the adapter's generate_until, and the whole path on a model that knows the answers and one that does not."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance
from torch import nn

from lit_modules.data import ByteTokenizer
from lit_modules.evaluation import EvalConfig
from lit_modules.evaluation.adapter import LiveLM
from lit_modules.evaluation.sampled import (
    SampledConfig,
    arithmetic_prompts,
    majority_correct,
    parse_answer,
    pass_at_k,
    sampled_metrics,
)
from lit_modules.model import Llama, LlamaConfig

TOK = ByteTokenizer()


def test_pass_at_k_on_known_cases():
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))  # 0.7
    assert pass_at_k(5, 2, 1) == pytest.approx(2 / 5)  # pass@1 is the share of correct samples
    assert pass_at_k(4, 0, 4) == 0.0 and pass_at_k(4, 1, 4) == 1.0 and pass_at_k(10, 8, 3) == 1.0
    assert pass_at_k(200, 13, 10) == pytest.approx(1 - math.comb(187, 10) / math.comb(200, 10), rel=1e-12)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_majority_vote_on_known_cases():
    assert majority_correct(["7", "8", "7", "9"], "7")
    assert not majority_correct(["8", "7", "8", None], "7")
    assert majority_correct(["7", "8"], "7") and not majority_correct(["8", "7"], "7")  # a tie: first seen wins
    assert majority_correct([None, None, "7"], "7") and not majority_correct([None, None], "7")


def test_answers_are_the_first_integer_of_a_generation():
    assert parse_answer(" 42 apples") == "42" and parse_answer("-3") == "-3" and parse_answer("none") is None


def test_prompts_are_deterministic_for_a_seed():
    assert arithmetic_prompts(5, seed=1) == arithmetic_prompts(5, seed=1) != arithmetic_prompts(5, seed=2)
    prompt = arithmetic_prompts(1)[0]
    a, b = map(int, re.search(r"(\d+)\+(\d+)=$", prompt.context).groups())
    assert prompt.answer == str(a + b)


class Adder(nn.Module):
    """Knows the answer: after "a+b=<digits so far>" it predicts the sum's next digit, then a newline."""

    max_seq_len = 64

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        targets = torch.full(idx.shape, ord("\n"))
        for row in range(idx.shape[0]):
            for t in range(idx.shape[1]):
                text = TOK.decode([i for i in idx[row, : t + 1].tolist() if i < 256])
                found = re.search(r"(\d+)\+(\d+)=(\d*)$", text)
                if found:
                    total, written = str(int(found[1]) + int(found[2])), found[3]
                    targets[row, t] = ord(total[len(written)]) if len(written) < len(total) else ord("\n")
        return F.one_hot(targets, TOK.vocab_size).float() * 20


def sampling(context, temperature, position):
    return Instance("generate_until", {}, (context, {"until": ["\n"], "max_gen_toks": 8, "do_sample": True,
                                                    "temperature": temperature}), position)


def test_a_model_that_knows_the_answers_scores_one_and_one_that_does_not_scores_zero():
    cfg = SampledConfig(k=2, n=3, temperature=0.5, prompts=6)
    right = sampled_metrics(LiveLM(Adder(), TOK, device="cpu"), "arithmetic", cfg)
    assert right == {"eval/arithmetic/greedy_pass_at_1": 1.0, "eval/arithmetic/pass_at_1": 1.0,
                     "eval/arithmetic/pass_at_2": 1.0, "eval/arithmetic/maj_at_2": 1.0}
    wrong = Llama(LlamaConfig(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=64))
    assert set(sampled_metrics(LiveLM(wrong, TOK, device="cpu"), "arithmetic", cfg).values()) == {0.0}


def test_sampling_is_seeded_per_request_and_greedy_without_do_sample():
    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=64))
    requests = [sampling("ab", 1.0, i) for i in range(6)]
    first = LiveLM(model, TOK, device="cpu", seed=3).generate_until(requests)
    again = LiveLM(model, TOK, device="cpu", seed=3, batch_size=2).generate_until(requests)
    other = LiveLM(model, TOK, device="cpu", seed=4).generate_until(requests)
    assert first == again and first != other and len(set(first)) > 1  # repeats of one prompt differ
    greedy = Instance("generate_until", {}, ("ab", {"until": ["\n"], "max_gen_toks": 8}), 0)
    cold = Instance("generate_until", {}, ("ab", {"until": ["\n"], "max_gen_toks": 8, "do_sample": True,
                                                   "temperature": 1e-4}), 0)
    lm = LiveLM(model, TOK, device="cpu")
    assert lm.generate_until([greedy]) == lm.generate_until([cold])


def test_sampled_settings_are_checked():
    problems = EvalConfig(sampled=["gsm8k"], sampled_k=5, sampled_n=4, sampled_temperature=0).problems("x", check_hub=False)
    assert len(problems) == 3 and "unknown task 'gsm8k'" in problems[0]
