"""Data layer: corpora, tokenizers, token shards and the LightningDataModule.

Typical use:
    corpus = prepare_corpus(data_cfg)
    tokenizer = build_tokenizer(tokenizer_cfg, corpus)
    shards = prepare_shards(corpus, tokenizer)
    datamodule = LMDataModule(shards, data_cfg.seq_len, data_cfg.batch_size, seed)
"""

# The data and tokenizer schemas live in config/data.py (config/ is below data/); they stay part
# of this package's API, which the data tests and fine-tuning use.
from lit_modules.config.data import DataConfig, TokenizerConfig, static_vocab_size
from lit_modules.errors import DataError

from .corpus import Corpus, prepare_corpus
from .shards import ShardSet, prepare_shards
from .tokenization import BPETokenizer, ByteTokenizer, PretrainedTokenizer, Tokenizer, build_tokenizer


def __getattr__(name: str):
    # Lazy: importing Lightning costs seconds, and `prepare` / config checks do not need it.
    if name == "LMDataModule":
        from .datamodule import LMDataModule

        return LMDataModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BPETokenizer",
    "ByteTokenizer",
    "Corpus",
    "DataConfig",
    "DataError",
    "LMDataModule",
    "PretrainedTokenizer",
    "ShardSet",
    "Tokenizer",
    "TokenizerConfig",
    "build_tokenizer",
    "prepare_corpus",
    "prepare_shards",
    "static_vocab_size",
]
