"""Linear probes: known answers on synthetic text, one accuracy per hidden state, deterministic,
and clear one-sentence refusals."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lit_modules.data import ByteTokenizer, DataConfig, prepare_corpus
from lit_modules.data.documents import iter_documents
from lit_modules.evaluation import EvalError
from lit_modules.evaluation.probes import document_passages, run_probes, speaker_passages
from lit_modules.model import Llama, LlamaConfig

TOK = ByteTokenizer()


def make_model(n_layers: int = 2) -> Llama:
    torch.manual_seed(0)
    return Llama(
        LlamaConfig(
            vocab_size=TOK.vocab_size, d_model=32, n_layers=n_layers, n_heads=4, d_ff=64, max_seq_len=64
        )
    )


def test_separable_documents_are_probed_perfectly():
    documents = [
        "abcab " * 400,
        "xyzzy " * 400,
        "mnopq " * 400,
    ]  # different alphabets: bag of bytes separates them
    result = run_probes(make_model(3), TOK, documents, seq_len=32, max_passages=90, seed=0, device="cpu")
    assert len(result.layer_acc) == 4  # embeddings + 3 blocks
    assert result.layer_acc[0] == 1.0 and result.n_classes == 3
    assert result.majority_acc == pytest.approx(1 / 3, abs=0.05)
    assert set(result.metrics()) == {
        *(f"eval/probe/layer_{i}/acc" for i in range(4)),
        "eval/probe/majority_acc",
        "eval/probe/best_acc",
    }


def test_probes_are_deterministic_and_balanced():
    heldout = list(iter_documents(prepare_corpus(DataConfig()).heldout_path))
    first = run_probes(make_model(), TOK, heldout, seq_len=32, max_passages=120, seed=5, device="cpu")
    again = run_probes(make_model(), TOK, heldout, seq_len=32, max_passages=120, seed=5, device="cpu")
    assert first.layer_acc == again.layer_acc and first.n_train + first.n_test == 120
    passages, labels = document_passages(heldout, TOK, 32, 120, seed=5)
    assert labels.count(labels[0]) == 60 and all(len(p) == 32 for p in passages)


def test_speaker_labels_from_plays():
    heldout = list(iter_documents(prepare_corpus(DataConfig()).heldout_path))
    passages, labels = speaker_passages(heldout, TOK, 64, 200, seed=0)
    assert len(set(labels)) == 4 and all(name.isupper() for name in labels)
    assert all(16 <= len(p) <= 64 for p in passages)
    result = run_probes(
        make_model(), TOK, heldout, labels="speaker", seq_len=64, max_passages=200, seed=0, device="cpu"
    )
    assert result.n_classes == 4 and len(result.layer_acc) == 3


def test_too_few_classes_is_one_sentence():
    with pytest.raises(EvalError, match="fewer than two document classes"):
        run_probes(make_model(), TOK, ["only one document " * 50], seq_len=16, device="cpu")


def test_model_without_hidden_states_is_refused():
    class LogitsOnly(nn.Module):
        def forward(self, idx):
            return torch.zeros(*idx.shape, TOK.vocab_size)

    with pytest.raises(EvalError, match="return_hidden"):
        run_probes(
            LogitsOnly(), TOK, ["aaaa " * 100, "bbbb " * 100], seq_len=16, max_passages=40, device="cpu"
        )
