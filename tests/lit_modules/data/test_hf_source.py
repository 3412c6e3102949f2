"""The hf source, offline: local JSON files through `datasets`, a wrong text field, an unreachable hub."""

import os

# Nothing may reach the Hugging Face hub from tests; must be set before `datasets` is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import json
from pathlib import Path

import pytest

from lit_modules.data import DataConfig, DataError, prepare_corpus
from lit_modules.data.documents import iter_documents
from tests.helpers.data import assert_one_sentence


def write_jsonl(path: Path, count: int) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(
                json.dumps({"text": f"Story {i}: once upon a time there was a number {i * 7}.", "id": i})
                + "\n"
            )


def test_hf_loader_on_local_json_files(tmp_path):
    data = tmp_path / "stories.jsonl"
    write_jsonl(data, 120)
    cfg = dict(
        name="stories",
        source="hf",
        hf_path="json",
        data_files=[str(data)],
        heldout_fraction=0.3,
        max_documents=100,
    )
    corpus = prepare_corpus(DataConfig(cache_dir=str(tmp_path / "a"), **cfg))
    train, heldout = list(iter_documents(corpus.train_path)), list(iter_documents(corpus.heldout_path))
    assert len(train) + len(heldout) == 100 and train and heldout
    assert not set(train) & set(heldout)
    assert "Story 0: once upon a time there was a number 0." in train + heldout
    again = prepare_corpus(DataConfig(cache_dir=str(tmp_path / "b"), **cfg))
    assert again.fingerprint == corpus.fingerprint  # deterministic split


def test_hf_loader_reports_a_wrong_text_field(tmp_path):
    data = tmp_path / "stories.jsonl"
    write_jsonl(data, 10)
    with pytest.raises(DataError, match="no field 'body'"):
        prepare_corpus(
            DataConfig(
                name="s",
                source="hf",
                hf_path="json",
                data_files=[str(data)],
                text_field="body",
                cache_dir=str(tmp_path),
            )
        )


def test_unreachable_hub_is_one_sentence(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub

    # In case another test module imported `datasets` before our environment variables were set.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    cfg = DataConfig(
        name="missing", source="hf", hf_path="no-such-user/no-such-dataset-xyz", cache_dir=str(tmp_path)
    )
    with pytest.raises(DataError) as error:
        prepare_corpus(cfg)
    message = str(error.value)
    assert_one_sentence(message)
    assert "hub is unreachable" in message and "data=shakespeare" in message
    assert error.value.__cause__ is None and error.value.__suppress_context__
