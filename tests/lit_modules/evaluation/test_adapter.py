"""The lm-eval adapter scores exactly what a direct forward pass scores, windows long inputs correctly,
handles empty contexts, generates greedily with stops, and the standard suites refuse cleanly offline."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance
from torch import nn

from lit_modules.config.eval_hub import hub_unreachable_sentence
from lit_modules.data import ByteTokenizer
from lit_modules.evaluation import EvalConfig, EvalError
from lit_modules.evaluation.adapter import LiveLM, padded_length, shared_forwards
from lit_modules.evaluation.windows import Window, continuation_windows, scoring_windows
from tests.helpers.models import small_llama

TOK = ByteTokenizer()


# The byte vocabulary, plain multi-head attention and the constructor's own init.
tiny_llama = partial(small_llama, init=None, vocab_size=TOK.vocab_size, n_kv_heads=None, d_ff=64,
                     max_seq_len=64)


class Bigram(nn.Module):
    """Logits depend on the current token only: any context length gives the same prediction."""

    def __init__(self, vocab: int, max_seq_len: int, seed: int = 0):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.table = nn.Parameter(torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(seed)))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        assert idx.shape[1] <= self.max_seq_len
        return self.table[idx]


class LastTokens(nn.Module):
    """Logits depend on the last `k` tokens only (a causal convolution, zero-padded on the left): any window
    holding those k tokens predicts exactly what the whole sequence predicts."""

    def __init__(self, vocab: int, k: int, max_seq_len: int, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.k, self.max_seq_len = k, max_seq_len
        self.emb = nn.Embedding(vocab, 8)
        self.conv = nn.Conv1d(8, vocab, k)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        assert idx.shape[1] <= self.max_seq_len
        x = F.pad(self.emb(idx).transpose(1, 2), (self.k - 1, 0))
        return self.conv(x).transpose(1, 2)


class Successor(nn.Module):
    """Always predicts byte+1 (so greedy decoding from 'a' writes 'bcdef...'), or EOS after 'z'."""

    max_seq_len = 32

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        following = torch.where(idx == ord("z"), torch.full_like(idx, TOK.eos_id), (idx + 1) % TOK.vocab_size)
        return F.one_hot(following, TOK.vocab_size).float() * 10


def ll_requests(pairs):
    return [Instance("loglikelihood", {}, pair, i) for i, pair in enumerate(pairs)]


def direct_logprob(model: nn.Module, prefix: list[int], continuation: list[int]) -> float:
    tokens = torch.tensor([prefix + continuation])
    with torch.no_grad():
        logprobs = F.log_softmax(model(tokens[:, :-1]).float(), dim=-1)[0]
    positions = range(len(prefix) - 1, len(prefix) + len(continuation) - 1)
    return sum(float(logprobs[p, tokens[0, p + 1]]) for p in positions)


PAIRS = [
    ("To be, or not to be: that is the ", "question"),
    ("Hello", " world"),
    ("A longer context with a trailing space ", "x"),
    ("Q", "uite a long continuation of several words"),
]


def test_loglikelihood_equals_direct_forward_pass():
    model = tiny_llama()
    scores = LiveLM(model, TOK, batch_size=3, device="cpu").loglikelihood(ll_requests(PAIRS))
    for (context, continuation), (score, _) in zip(PAIRS, scores):
        stripped = context.rstrip()
        moved = (
            context[len(stripped) :] + continuation
        )  # trailing context whitespace is scored with the continuation
        expected = direct_logprob(model, [TOK.eos_id] + TOK.encode(stripped), TOK.encode(moved))
        assert score == pytest.approx(expected, abs=1e-4)


def test_scores_do_not_depend_on_batch_size():
    model = tiny_llama()
    one = LiveLM(model, TOK, batch_size=1, device="cpu").loglikelihood(ll_requests(PAIRS))
    four = LiveLM(model, TOK, batch_size=4, device="cpu").loglikelihood(ll_requests(PAIRS))
    assert [s for s, _ in one] == pytest.approx([s for s, _ in four], abs=1e-4)


# Lengths within one padded length and across several, shared prefixes, and one context with choices that
# differ only in their last token (scored from one forward pass).
MIXED = [
    *PAIRS,
    ("The quick brown fox jumps over the lazy dog and", " runs"),
    ("The quick brown fox jumps over the lazy dog", " and"),
    ("The quick brown fox", " jumps over"),
    *[("Answer with one letter:", f" {letter}") for letter in "ABCD"],
    ("x" * 90, " past the window"),
    ("", "an empty context"),
]


def test_scores_are_bit_identical_to_batch_size_one():
    model = tiny_llama()
    alone = [LiveLM(model, TOK, batch_size=1, device="cpu").loglikelihood([r])[0] for r in ll_requests(MIXED)]
    for batch_size in (2, 5, 16):
        together = LiveLM(model, TOK, batch_size=batch_size, device="cpu").loglikelihood(ll_requests(MIXED))
        assert together == alone  # bit for bit, not approximately


def test_shared_forwards_read_prefixes_from_the_longer_window_of_the_same_padded_length():
    windows = [
        Window(0, (1, 2, 3), (2, 3, 4)),
        Window(1, (1, 2), (2, 3)),
        Window(2, (1, 2, 3), (2, 3, 9)),  # the same inputs as window 0: one forward
        Window(3, (1, 5), (5, 6)),
        Window(4, tuple(range(40)), (39,)),  # padded to 64: not the same shape as the others
        Window(5, (0, 1), (1, 2)),
    ]
    forwards = shared_forwards(windows, max_len=64, multiple=32)
    assert [(length, inputs, sorted(members)) for length, inputs, members in forwards] == [
        (64, tuple(range(40)), [4]),
        (32, (1, 5), [3]),
        (32, (1, 2, 3), [0, 1, 2]),
        (32, (0, 1), [5]),
    ]
    assert padded_length(64, 64) == 64 and padded_length(33, 50) == 50 and padded_length(1, 64) == 32


def test_shared_prefix_is_scored_as_it_is_alone():
    model = tiny_llama()
    lm = LiveLM(model, TOK, batch_size=8, device="cpu")
    short, long = ("Hello there", " friend"), ("Hello there friend, how", " are you")
    assert lm.loglikelihood(ll_requests([short]))[0] == lm.loglikelihood(ll_requests([long, short]))[1]
    expected = direct_logprob(model, [TOK.eos_id] + TOK.encode(short[0]), TOK.encode(short[1]))
    assert lm.loglikelihood(ll_requests([short]))[0][0] == pytest.approx(expected, abs=1e-4)


def test_bos_policy():
    model = tiny_llama()
    pairs = [("", "abc"), ("xy", "z")]
    with_bos = LiveLM(model, TOK, device="cpu").loglikelihood(ll_requests(pairs))
    without = LiveLM(model, TOK, add_bos=False, device="cpu").loglikelihood(ll_requests(pairs))
    bos_token = LiveLM(model, TOK, bos_token="bos", device="cpu").loglikelihood(ll_requests(pairs))
    # An empty context is conditioned on the start token whatever the policy.
    assert with_bos[0][0] == pytest.approx(direct_logprob(model, [TOK.eos_id], TOK.encode("abc")), abs=1e-4)
    assert without[0][0] == pytest.approx(with_bos[0][0], abs=1e-6)
    assert bos_token[0][0] == pytest.approx(direct_logprob(model, [TOK.bos_id], TOK.encode("abc")), abs=1e-4)
    assert without[1][0] == pytest.approx(direct_logprob(model, TOK.encode("xy"), TOK.encode("z")), abs=1e-4)
    assert with_bos[1][0] == pytest.approx(
        direct_logprob(model, [TOK.eos_id, *TOK.encode("xy")], TOK.encode("z")), abs=1e-4
    )


@pytest.mark.parametrize(
    "length, n_prefix, max_len", [(50, 1, 16), (17, 1, 16), (16, 3, 16), (100, 40, 7), (5, 1, 1)]
)
def test_windows_predict_every_token_exactly_once(length, n_prefix, max_len):
    tokens = list(range(1000, 1000 + length))  # values are their own positions + 1000
    predicted = []
    for window in scoring_windows(0, tokens, n_prefix, max_len):
        assert 1 <= len(window.inputs) <= max_len and len(window.targets) <= len(window.inputs)
        # the window's last predictions are exactly its targets, each predicted from the token before it
        assert (
            list(window.targets)
            == tokens[window.inputs[-1] - 1000 + 1 - len(window.targets) + 1 : window.inputs[-1] - 1000 + 2]
        )
        predicted += list(window.targets)
    assert predicted == tokens[n_prefix:]


@pytest.mark.parametrize(
    "length, n_prefix, max_len", [(50, 1, 16), (50, 20, 16), (17, 1, 16), (100, 40, 7), (30, 2, 2), (9, 1, 8)]
)
def test_continuation_windows_give_every_token_its_full_context(length, n_prefix, max_len):
    """A continuation longer than the window: each token predicted once, from >= max_len - 1 preceding tokens
    (or from all of them near the start); a continuation that fits is cut exactly as before."""
    tokens = list(range(length))  # values are their own positions
    windows = continuation_windows(0, tokens, n_prefix, max_len)
    predicted = []
    for window in windows:
        assert 1 <= len(window.inputs) <= max_len and len(window.targets) <= len(window.inputs)
        start, end = window.inputs[0], window.inputs[-1] + 1  # the window reads tokens[start:end]
        assert list(window.targets) == tokens[end - len(window.targets) + 1 : end + 1]
        for position in window.targets:
            assert position - start >= min(position, max_len - 1)
        predicted += list(window.targets)
    assert predicted == tokens[n_prefix:]
    if length - n_prefix <= max_len:
        assert windows == scoring_windows(0, tokens, n_prefix, max_len)


def test_long_continuation_is_scored_with_its_context():
    """k = max_len - 1: a token sees all it depends on iff it gets max_len - 1 preceding tokens, so the score
    must equal the unwindowed one; and a long continuation's score depends on the context before it."""
    model = LastTokens(TOK.vocab_size, k=15, max_seq_len=16)
    lm = LiveLM(model, TOK, batch_size=4, device="cpu")
    continuation = " and then the whole of the long tale was told again, word by word"  # 65 bytes >> 16
    contexts = ["The first context ends here.", "Quite another beginning, same end here."]
    scores = [score for score, _ in lm.loglikelihood(ll_requests([(c, continuation) for c in contexts]))]
    model.max_seq_len = 10_000  # the reference: one forward pass over the whole sequence
    for context, score in zip(contexts, scores):
        expected = direct_logprob(model, [TOK.eos_id] + TOK.encode(context), TOK.encode(continuation))
        assert score == pytest.approx(expected, abs=1e-4)
    assert abs(scores[0] - scores[1]) > 1e-3  # the two contexts share their last 6 bytes, not more


def test_long_continuations_leave_the_other_scores_bit_identical():
    """Requests that fit are windowed and batched exactly as before, with or without long ones beside them."""
    model = tiny_llama(max_seq_len=16)
    lm = LiveLM(model, TOK, batch_size=3, device="cpu")
    fitting = [(c, x) for c, x in PAIRS if len(TOK.encode(x)) <= 16]
    alone = lm.loglikelihood(ll_requests(fitting))
    long = ("Once", " upon a time there was a continuation far longer than sixteen bytes")
    mixed = lm.loglikelihood(ll_requests([long, *fitting, long]))
    assert mixed[1:-1] == alone
    pairs = [lm.encode_pair(*pair) for pair in fitting]  # the old cut: one window per request
    old = [scoring_windows(i, p + c, len(p), 16) for i, (p, c) in enumerate(pairs)]
    assert all(len(w) == 1 for w in old)
    assert [score for score, _ in alone] == [score for score, _ in lm.score_windows([w[0] for w in old])]


def test_rolling_loglikelihood_of_a_document_longer_than_the_context():
    model = Bigram(TOK.vocab_size, max_seq_len=16)
    text = "the quick brown fox jumps over the lazy dog, " * 3  # 135 bytes >> 16
    (rolling,) = LiveLM(model, TOK, device="cpu").loglikelihood_rolling(
        [Instance("loglikelihood_rolling", {}, (text,), 0)]
    )
    tokens = [TOK.eos_id] + TOK.encode(text)
    table = F.log_softmax(model.table.detach(), dim=-1)
    expected = sum(float(table[a, b]) for a, b in zip(tokens[:-1], tokens[1:]))
    assert isinstance(rolling, float)
    assert rolling == pytest.approx(expected, abs=1e-3)


def test_long_context_is_left_truncated():
    model = tiny_llama(max_seq_len=16)
    context, continuation = "abcdefghijklmnopqrstuvwxyz" * 2, "ABC"
    ((score, _),) = LiveLM(model, TOK, device="cpu").loglikelihood(ll_requests([(context, continuation)]))
    # The last continuation token sees exactly the 16 tokens before it; earlier ones see <= 16 as well.
    tokens = [TOK.eos_id] + TOK.encode(context) + TOK.encode(continuation)
    n = len(TOK.encode(continuation))
    expected = direct_logprob(model, tokens[-(16 + 1) : -n], tokens[-n:])
    assert score == pytest.approx(expected, abs=1e-4)


def test_generate_until_stops_at_until_and_max_gen_toks():
    lm = LiveLM(Successor(), TOK, batch_size=2, device="cpu")
    requests = [
        Instance("generate_until", {}, ("a", {"until": ["e"], "max_gen_toks": 50}), 0),
        Instance("generate_until", {}, ("k", {"until": ["zz"], "max_gen_toks": 3}), 1),
        Instance("generate_until", {}, ("w", {"until": "never"}), 2),  # stops at EOS after 'z'
        Instance("generate_until", {}, ("", {"until": ["\n"], "max_gen_toks": 2}), 3),
    ]
    # The empty context starts from EOS (257): the model writes PAD (258, decodes to nothing), then byte 0.
    assert lm.generate_until(requests) == ["bcd", "lmn", "xyz", "\x00"]


def test_generation_from_a_context_longer_than_the_model_window():
    lm = LiveLM(Successor(), TOK, device="cpu")
    (text,) = lm.generate_until([Instance("generate_until", {}, ("x" * 100 + "c", {"until": ["g"]}), 0)])
    assert text == "def"


def test_greedy_flag_matches_argmax():
    lm = LiveLM(Successor(), TOK, device="cpu")
    (_, greedy_yes), (_, greedy_no) = lm.loglikelihood(ll_requests([("ab", "cd"), ("ab", "cx")]))
    assert greedy_yes and not greedy_no


def test_offline_standard_suite_is_one_sentence(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg = EvalConfig(tasks=["boolq", "local", "hellaswag"])
    problems = cfg.problems("shakespeare")
    assert len(problems) == 1
    sentence = problems[0]
    assert sentence.count(". ") == 0 and sentence.endswith(".") and "\n" not in sentence
    assert "unreachable" in sentence and "HF_HUB_OFFLINE=1" in sentence and "boolq, hellaswag" in sentence
    assert "local_cloze_shakespeare" in sentence and "local_ppl_shakespeare" in sentence


def test_unreachable_hub_is_detected_fast(monkeypatch):
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    sentence = hub_unreachable_sentence(["piqa"], "python_docs", timeout_s=1.0)
    assert sentence is not None and "no connection" in sentence and "local_nextsent_python_docs" in sentence


def test_evaluate_run_refuses_standard_tasks_offline_before_any_work(monkeypatch, tmp_path):
    from lit_modules.evaluation import evaluate_run

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    class NoCorpus:
        name = "shakespeare"

    with pytest.raises(EvalError, match="unreachable"):
        evaluate_run(tiny_llama(), TOK, NoCorpus(), EvalConfig(tasks=["arc_easy"]), tmp_path)
    assert not any(tmp_path.iterdir())


def test_config_problems_are_one_sentence_each():
    cfg = EvalConfig(batch_size=0, bos_token="cls", tasks=["local_foo_shakespeare"], precision="fp8")
    problems = cfg.problems("shakespeare", check_hub=False)
    assert len(problems) == 4
    assert all(p.endswith(".") and "\n" not in p for p in problems)
    assert (
        EvalConfig().problems() == []
        and EvalConfig(tasks=["local", "local_ppl_python_docs"]).problems() == []
    )


def test_bench_adapter_reports_both_rates():
    from lit_modules.evaluation import bench_adapter

    numbers = bench_adapter(tiny_llama(), TOK, n_requests=16, batch_size=8, device="cpu", repeats=1)
    assert numbers["batched_rps"] > 0 and numbers["single_rps"] > 0
    assert math.isclose(numbers["ratio"], numbers["batched_rps"] / numbers["single_rps"])
    assert numbers["ratios"] == [numbers["ratio"]] and numbers["identical"] is True
