"""Local tasks: built deterministically from held-out text only, registered with lm-eval offline,
and scored into `eval/<task>/<metric>` metrics plus per-sample files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from lit_modules.data import DataConfig, DataError, prepare_corpus
from lit_modules.data.documents import iter_documents
from lit_modules.evaluation.local_tasks import (
    MAX_CHOICE_CHARS, SMALLEST_WINDOW, build_cloze, build_nextsent, build_ppl,
)
from lit_modules.evaluation.local_text import final_word_spans, passage_spans, sentence_spans
from lit_modules.evaluation.results import flat_metrics
from lit_modules.evaluation.task_files import prepare_local_tasks, read_items
from lit_modules.config.eval_tasks import split_tasks


@pytest.fixture(scope="module")
def corpus():
    return prepare_corpus(DataConfig())  # the embedded Shakespeare corpus in the project cache


@pytest.fixture(scope="module")
def heldout(corpus):
    return list(iter_documents(corpus.heldout_path))


@pytest.fixture(scope="module")
def train_text(corpus):
    return corpus.train_path.read_text(encoding="utf-8")


def test_text_cutting_rules():
    text = "Hello world. This is it!\n\nSecond para\nline two.\n  \n\nThird para here?  Yes."
    assert [text[s.start : s.end] for s in sentence_spans(text)] == [
        "Hello world.",
        "This is it!",
        "Second para\nline two.",
        "Third para here?",
        "Yes.",
    ]
    assert [text[s.start : s.end] for s in final_word_spans(text)] == ["world", "two", "here", "Yes"]
    assert [text[s.start : s.end] for s in passage_spans(text, 30)] == [
        "Hello world. This is it!",
        "Second para\nline two.",
        "Third para here?  Yes.",
    ]
    assert [text[s.start : s.end] for s in passage_spans(text, 60)] == [
        "Hello world. This is it!\n\nSecond para\nline two.",
        "Third para here?  Yes.",
    ]


def test_task_lists_expand_local():
    assert split_tasks(["local", "boolq", "local_ppl_shakespeare", "boolq"], "shakespeare") == (
        ["local_cloze_shakespeare", "local_ppl_shakespeare", "local_nextsent_shakespeare"],
        ["boolq"],
    )


@pytest.mark.parametrize("builder", [build_cloze, build_nextsent, build_ppl])
def test_building_is_deterministic(builder, heldout):
    first, again = builder(heldout, 200, seed=7), builder(heldout, 200, seed=7)
    assert first == again and len(first) == 200
    assert builder(heldout, 200, seed=8) != first
    assert [(i["doc"], i["offset"]) for i in first] == sorted((i["doc"], i["offset"]) for i in first)


def test_items_are_well_formed(heldout):
    for item in build_cloze(heldout, 100, seed=0):
        target = item["choices"][item["label"]]
        assert len(item["choices"]) == 4 and len({c.lower() for c in item["choices"]}) == 4
        assert item["context"][-1].isspace() and heldout[item["doc"]][item["offset"] :].startswith(target)
        assert len({c[0].isupper() for c in item["choices"]}) == 1  # capitalisation is no cue
    for item in build_nextsent(heldout, 100, seed=0):
        assert heldout[item["doc"]][item["offset"] :].startswith(item["choices"][item["label"]])
        assert heldout[item["doc"]][: item["offset"]].endswith(item["context"])
    for item in build_ppl(heldout, 100, seed=0):
        assert heldout[item["doc"]][item["offset"] :].startswith(item["text"])


def test_no_item_has_an_empty_context():
    """A sentence after a line longer than the context window: the offset is far past the minimum, but the
    context (cut at a line start) would be a lone newline; such a sentence is no item."""
    long_line = "[A stage direction that runs on " + "and on " * 80 + "until it ends.]"  # > 400 chars
    play = (
        "KING:\nWe open here with words enough to be a context for what follows.\n"
        "And a second line of it, to be sure.\n\nQUEEN:\nThen let the next one speak.\n\n"
        f"{long_line}\n\nGARTER:\nHeaven send prosperous life to the high and mighty princess.\n"
    )
    items = build_nextsent([play], 50, seed=0, n_choices=2)
    answers = [item["choices"][item["label"]] for item in items]
    assert answers == ["And a second line of it, to be sure.", "QUEEN:\nThen let the next one speak."]
    assert all(len(item["context"].strip()) >= 50 for item in items)
    cloze = build_cloze([play.replace("princess.", "princess is here.")], 50, seed=0, n_choices=2)
    # "princess" and "here" follow the long line: their contexts would hold a newline and one short line.
    assert [item["choices"][item["label"]] for item in cloze] == ["sure", "speak"]
    assert all(len(item["context"].strip()) >= 100 for item in cloze)


@pytest.mark.parametrize("builder, minimum", [(build_cloze, 100), (build_nextsent, 50)])
def test_every_heldout_item_has_its_minimum_context(builder, minimum, heldout):
    items = builder(heldout, 300, seed=1234)  # the run's default items
    assert len(items) == 300 and min(len(item["context"].strip()) for item in items) >= minimum


@pytest.mark.parametrize("builder", [build_cloze, build_nextsent])
def test_every_choice_keeps_half_the_smallest_window_for_its_context(builder, heldout):
    # Scored as lm-eval does: (context + choice) cut from the left to the window; a choice's own bytes are
    # never cut, so the context it sees is the window minus the choice, and that must stay >= 64 tokens.
    from lit_modules.data.tokenization import ByteTokenizer

    tok = ByteTokenizer()
    for item in builder(heldout, 300, seed=1234):
        for choice in item["choices"]:
            kept = min(len(tok.encode(item["context"])), SMALLEST_WINDOW - len(tok.encode(choice)))
            assert kept >= SMALLEST_WINDOW - MAX_CHOICE_CHARS, (item["context"][-40:], choice)


def test_items_never_come_from_training_text(heldout, train_text):
    for item in build_cloze(heldout, 300, seed=0) + build_nextsent(heldout, 300, seed=0):
        assert item["context"][-150:] not in train_text
    for item in build_ppl(heldout, 300, seed=0):
        assert item["text"][:150] not in train_text


def test_task_files_are_written_once_and_verified(corpus, tmp_path):
    local = dataclasses.replace(corpus, cache_dir=tmp_path)  # same held-out text, task files under tmp_path
    folder, manifest = prepare_local_tasks(local, n_items=50, seed=3)
    assert prepare_local_tasks(local, n_items=50, seed=3) == (folder, manifest)
    for task, entry in manifest["tasks"].items():
        config = yaml.safe_load((folder / task / f"{task}.yaml").read_text())
        data_file = config["dataset_kwargs"]["data_files"]["test"]
        assert config["task"] == task and data_file.startswith(str(tmp_path))
        assert read_items(folder, task) == [
            json.loads(line) for line in Path(data_file).read_text().splitlines()
        ]
        assert entry["items"] == 50
    data_file = folder / "local_cloze_shakespeare" / "data.jsonl"
    original = data_file.read_text()
    data_file.write_text(original.replace("e", "E", 1))
    try:
        with pytest.raises(DataError, match="damaged"):
            prepare_local_tasks(local, n_items=50, seed=3)
    finally:
        data_file.write_text(original)


def test_other_embedded_corpus_gets_its_own_tasks(corpus):
    from lit_modules.evaluation.evaluate import corpus_for_task

    other = corpus_for_task("local_ppl_python_docs", corpus)  # prepared with conf/data/python_docs.yaml
    assert other.name == "python_docs" and other.cache_dir == corpus.cache_dir
    assert corpus_for_task("local_ppl_shakespeare", corpus) is corpus
    _, manifest = prepare_local_tasks(other, n_items=300, seed=1234)
    assert set(manifest["tasks"]) == {
        "local_cloze_python_docs",
        "local_ppl_python_docs",
        "local_nextsent_python_docs",
    }
    assert all(entry["items"] >= 20 for entry in manifest["tasks"].values())


def test_flat_metric_names():
    results = {
        "results": {
            "t": {
                "alias": "t",
                "sample_len": 3,
                "acc,none": 0.5,
                "acc_stderr,none": "N/A",
                "exact_match,strict": 1.0,
                "bits_per_byte,none": 2.0,
            }
        }
    }
    assert flat_metrics(results) == {
        "eval/t/items": 3.0,  # sample_len: the items scored
        "eval/t/acc": 0.5,
        "eval/t/exact_match/strict": 1.0,
        "eval/t/bits_per_byte": 2.0,
    }


def test_lm_eval_scores_local_tasks_offline(corpus, tmp_path):
    import torch

    from lit_modules.data import ByteTokenizer
    from lit_modules.evaluation import EvalConfig, evaluate_run
    from lit_modules.model import Llama, LlamaConfig

    torch.manual_seed(0)
    model = Llama(LlamaConfig(vocab_size=259, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_seq_len=64))
    cfg = EvalConfig(tasks=["local"], limit=8, save_token_logprobs=False, local_items=300)
    outcome = evaluate_run(model, ByteTokenizer(), corpus, cfg, tmp_path)
    names = {k for k in outcome.metrics if k != "eval/seconds"}
    assert names == {
        "eval/local_cloze_shakespeare/acc",
        "eval/local_cloze_shakespeare/acc_norm",
        "eval/local_nextsent_shakespeare/acc",
        "eval/local_nextsent_shakespeare/acc_norm",
        "eval/local_ppl_shakespeare/bits_per_byte",
        "eval/local_ppl_shakespeare/byte_perplexity",
        "eval/local_ppl_shakespeare/word_perplexity",
        "eval/local_cloze_shakespeare/items",
        "eval/local_nextsent_shakespeare/items",
        "eval/local_ppl_shakespeare/items",
    }
    assert outcome.metrics["eval/local_cloze_shakespeare/items"] == 8  # limit=8: what was scored
    # bits per byte and byte perplexity are two views of the same number
    bpb = outcome.metrics["eval/local_ppl_shakespeare/bits_per_byte"]
    assert outcome.metrics["eval/local_ppl_shakespeare/byte_perplexity"] == pytest.approx(2**bpb, rel=1e-6)
    results = json.loads((tmp_path / "lm_eval_results.json").read_text())
    assert results["live_model"]["batch_size"] == 16 and results["live_model"]["add_bos"] is True
    assert results["live_model"]["lm_eval_version"] == "0.4.13"
    samples = tmp_path / "samples" / "local_cloze_shakespeare.jsonl"
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [r["doc_id"] for r in rows] == list(range(8))
    assert all(len(r["loglikelihoods"]) == 4 and r["correct"] == (r["acc"] == 1.0) for r in rows)
    items = read_items(prepare_local_tasks(corpus, 300, 1234)[0], "local_cloze_shakespeare")
    assert [r["target"] for r in rows] == [item["label"] for item in items[:8]]
    assert all(p.exists() for p in outcome.artifacts)
