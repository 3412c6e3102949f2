"""Tokenizers behind one small protocol: bytes, a BPE trained on our train split, or a tokenizer.json.

Named `tokenization` so it does not shadow the `tokenizers` library it wraps.
Every tokenizer has a `fingerprint` (a stable hash of everything that decides how
text maps to ids) so token shards and checkpoints can tell vocabularies apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from lit_modules.config.data import BYTE_VOCAB_SIZE, TokenizerConfig
from lit_modules.config.tokenizer_file import load_tokenizer_file
from lit_modules.errors import DataError

from .atomic import atomic_write_text
from .hashing import fingerprint, sha256_text

BOS_TOKEN, EOS_TOKEN, PAD_TOKEN = "<|bos|>", "<|eos|>", "<|pad|>"
# Names used for the start/end-of-text tokens by common pretrained tokenizers, in preference order.
EOS_CANDIDATES = (EOS_TOKEN, "<|endoftext|>", "</s>", "<eos>", "[SEP]")
BOS_CANDIDATES = (BOS_TOKEN, "<|endoftext|>", "<s>", "<bos>", "[CLS]")


@runtime_checkable
class Tokenizer(Protocol):
    name: str
    vocab_size: int
    bos_id: int
    eos_id: int
    fingerprint: str

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]: ...


class ByteTokenizer:
    """UTF-8 bytes as ids 0..255, then BOS, EOS, PAD. Exact round trip; bits per byte for free."""

    name = "byte"
    vocab_size = BYTE_VOCAB_SIZE
    bos_id, eos_id, pad_id = 256, 257, 258
    fingerprint = fingerprint("byte-utf8", BYTE_VOCAB_SIZE)

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def decode(self, ids: Sequence[int]) -> str:
        # Model samples can be any byte sequence, so undecodable bytes become U+FFFD.
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")


class HFTokenizer:
    """A `tokenizers.Tokenizer` (BPE we trained, or a pretrained tokenizer.json) behind our protocol."""

    def __init__(self, backend, name: str):
        self._backend = backend
        # Text that happens to contain "<|eos|>" must stay text, not become the special id.
        backend.encode_special_tokens = True
        self.name = name
        self.vocab_size = backend.get_vocab_size(with_added_tokens=True)
        self.eos_id = _first_token_id(backend, EOS_CANDIDATES, name, "end-of-text")
        self.bos_id = _first_token_id(backend, BOS_CANDIDATES, name, "start-of-text", default=self.eos_id)
        canonical = json.dumps(json.loads(backend.to_str()), sort_keys=True)
        self.fingerprint = sha256_text(canonical)[:16]

    def encode(self, text: str) -> list[int]:
        return self._backend.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [
            encoding.ids for encoding in self._backend.encode_batch(list(texts), add_special_tokens=False)
        ]

    def decode(self, ids: Sequence[int]) -> str:
        return self._backend.decode(list(ids), skip_special_tokens=True)

    def save(self, path: str | Path) -> None:
        atomic_write_text(path, self._backend.to_str())


def _first_token_id(
    backend, candidates: Iterable[str], name: str, role: str, default: int | None = None
) -> int:
    for token in candidates:
        token_id = backend.token_to_id(token)
        if token_id is not None:
            return token_id
    if default is not None:
        return default
    raise DataError(
        f"The tokenizer {name} has no {role} token (looked for {', '.join(candidates)}); "
        "add one to its tokenizer.json."
    )


class PretrainedTokenizer(HFTokenizer):
    def __init__(self, path: str | Path):
        super().__init__(load_tokenizer_file(path), name=f"pretrained:{Path(path).name}")
        self.path = Path(path)


class BPETokenizer(HFTokenizer):
    """Byte-level BPE: any string round-trips exactly because the base alphabet is all 256 bytes.

    `vocab_size` is the requested size even when a small corpus runs out of merges
    first (ids above the learned ones are then simply unused and decode to nothing), so it always equals
    `static_vocab_size` and the model can be sized before training the tokenizer.
    """

    def __init__(self, backend, vocab_size: int):
        super().__init__(backend, name=f"bpe-{vocab_size}")
        self.learned_vocab_size = self.vocab_size
        if vocab_size > self.learned_vocab_size:
            # The padded id space is part of the identity: shards record vocab_size and dtype.
            self.vocab_size = vocab_size
            self.fingerprint = fingerprint(self.fingerprint, vocab_size)

    @classmethod
    def train(cls, documents: Iterable[str], vocab_size: int) -> BPETokenizer:
        from tokenizers import Tokenizer as Backend
        from tokenizers import decoders, models, pre_tokenizers, trainers

        backend = Backend(models.BPE())
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        backend.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=[BOS_TOKEN, EOS_TOKEN, PAD_TOKEN],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        backend.train_from_iterator(documents, trainer=trainer)
        return cls(backend, vocab_size)

    @classmethod
    def load(cls, path: str | Path, vocab_size: int) -> BPETokenizer:
        return cls(load_tokenizer_file(path), vocab_size)


def bpe_cache_path(cache_dir: str | Path, corpus_fingerprint: str, vocab_size: int) -> Path:
    return Path(cache_dir) / "tokenizers" / f"bpe-{vocab_size}-{corpus_fingerprint}" / "tokenizer.json"


def build_tokenizer(cfg: TokenizerConfig, corpus=None, cache_dir: str | Path | None = None) -> Tokenizer:
    """The tokenizer `cfg` asks for. BPE trains on `corpus`'s train split once, then loads from cache.

    `cache_dir` defaults to the cache folder the corpus was prepared under.
    """
    cfg = TokenizerConfig.from_any(cfg)
    problems = cfg.problems()
    if problems:
        raise DataError(problems[0])
    if cfg.kind == "byte":
        return ByteTokenizer()
    if cfg.kind == "pretrained":
        return PretrainedTokenizer(cfg.path)
    if corpus is None:
        raise DataError(
            "A BPE tokenizer is trained on a corpus, so build_tokenizer needs the prepared corpus."
        )
    from .documents import iter_documents
    from .locking import build_lock

    path = bpe_cache_path(cache_dir or corpus.cache_dir, corpus.fingerprint, cfg.vocab_size)
    with build_lock(path.parent):
        if path.exists():
            return BPETokenizer.load(path, cfg.vocab_size)
        tokenizer = BPETokenizer.train(iter_documents(corpus.train_path), cfg.vocab_size)  # train split only
        tokenizer.save(path)
        return tokenizer
