"""Token shards: each split tokenized once into a flat `.bin` array that training memory-maps.

Layout: `<cache_dir>/shards/<key>/{train.bin, heldout.bin, manifest.json}` where the
key hashes (corpus fingerprint, tokenizer fingerprint). Every document is followed
by EOS. `manifest.json` is written last (commit marker) and records sizes and
checksums, which are checked on every reuse.

`bytes` per split counts the UTF-8 bytes of the documents plus one per EOS (it
stands for the document separator), so it is the same for every tokenizer and
bits-per-byte = loss_nats * n_tokens / (ln 2 * bytes) compares tokenizers fairly;
for the byte tokenizer bytes == n_tokens exactly.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lit_modules.errors import DataError

from .atomic import atomic_open, atomic_write_json
from .corpus import Corpus
from .documents import iter_documents
from .hashing import fingerprint, sha256_file
from .locking import build_lock
from .records import read_record
from .tokenization import Tokenizer

SHARD_FORMAT_VERSION = 1
SPLITS = ("train", "heldout")
MANIFEST_FILE = "manifest.json"
_DOCUMENTS_PER_BATCH = 256


@dataclass(frozen=True)
class ShardSet:
    directory: Path
    manifest: dict = field(repr=False)

    @property
    def key(self) -> str:
        return self.directory.name

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.manifest["dtype"])

    @property
    def vocab_size(self) -> int:
        return self.manifest["tokenizer"]["vocab_size"]

    def path(self, split: str) -> Path:
        return self.directory / self.manifest["splits"][split]["file"]

    @property
    def train_path(self) -> Path:
        return self.path("train")

    @property
    def heldout_path(self) -> Path:
        return self.path("heldout")

    def n_tokens(self, split: str) -> int:
        return self.manifest["splits"][split]["n_tokens"]

    def bytes_per_token(self, split: str = "heldout") -> float:
        info = self.manifest["splits"][split]
        return info["bytes"] / info["n_tokens"]

    def tokens(self, split: str) -> np.memmap:
        return np.memmap(self.path(split), dtype=self.dtype, mode="r", shape=(self.n_tokens(split),))

    def train_tokens(self) -> np.memmap:
        return self.tokens("train")

    def heldout_tokens(self) -> np.memmap:
        return self.tokens("heldout")


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= 2**16 - 1 else np.dtype(np.uint32)


def shard_key(corpus: Corpus, tokenizer: Tokenizer) -> str:
    return fingerprint(SHARD_FORMAT_VERSION, corpus.fingerprint, tokenizer.fingerprint)


def prepare_shards(corpus: Corpus, tokenizer: Tokenizer, cache_dir: str | Path | None = None) -> ShardSet:
    """Tokenized splits of `corpus`, built on first use and verified on reuse."""
    directory = Path(cache_dir or corpus.cache_dir) / "shards" / shard_key(corpus, tokenizer)
    manifest_path = directory / MANIFEST_FILE
    with build_lock(directory):
        if manifest_path.exists():
            manifest = _read_manifest(manifest_path)
            _verify(directory, manifest)
        else:
            manifest = _build(corpus, tokenizer, directory)
    return ShardSet(directory=directory, manifest=manifest)


def _read_manifest(path: Path) -> dict:
    return read_record(
        path,
        lambda m: [m["splits"][split]["sha256"] for split in SPLITS],
        f"The shard manifest {path} is unreadable; delete {path.parent} and run again to rebuild it.",
    )


def _verify(directory: Path, manifest: dict) -> None:
    itemsize = np.dtype(manifest["dtype"]).itemsize
    for split in SPLITS:
        info = manifest["splits"][split]
        path = directory / info["file"]
        if (
            not path.exists()
            or path.stat().st_size != info["n_tokens"] * itemsize
            or sha256_file(path) != info["sha256"]
        ):
            raise DataError(
                f"The token shard {path} is missing or does not match its manifest; "
                f"delete {directory} and run again to rebuild it."
            )


def _build(corpus: Corpus, tokenizer: Tokenizer, directory: Path) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    dtype = token_dtype(tokenizer.vocab_size)
    splits = {
        "train": _tokenize_split(corpus.train_path, tokenizer, dtype, directory / "train.bin"),
        "heldout": _tokenize_split(corpus.heldout_path, tokenizer, dtype, directory / "heldout.bin"),
    }
    manifest = {
        "format_version": SHARD_FORMAT_VERSION,
        "tokenizer": {
            "name": tokenizer.name,
            "fingerprint": tokenizer.fingerprint,
            "vocab_size": tokenizer.vocab_size,
            "bos_id": tokenizer.bos_id,
            "eos_id": tokenizer.eos_id,
        },
        "corpus": {"name": corpus.name, "fingerprint": corpus.fingerprint},
        "dtype": dtype.name,
        "document_separator": "eos after every document",
        "splits": splits,
    }
    atomic_write_json(directory / MANIFEST_FILE, manifest)
    return manifest


def _tokenize_split(text_path: Path, tokenizer: Tokenizer, dtype: np.dtype, bin_path: Path) -> dict:
    sha256 = hashlib.sha256()
    n_tokens = n_bytes = n_documents = 0
    documents = iter_documents(text_path)
    with atomic_open(bin_path, "wb") as handle:
        while batch := list(itertools.islice(documents, _DOCUMENTS_PER_BATCH)):
            pieces = []
            for ids in tokenizer.encode_batch(batch):
                pieces.append(np.asarray(ids, dtype=np.int64))
                pieces.append(np.array([tokenizer.eos_id], dtype=np.int64))
            tokens = np.concatenate(pieces)
            if tokens.size and (tokens.min() < 0 or tokens.max() >= tokenizer.vocab_size):
                raise DataError(
                    f"The tokenizer {tokenizer.name} produced ids outside its vocabulary "
                    f"of {tokenizer.vocab_size}."
                )
            encoded = tokens.astype(dtype).tobytes()
            handle.write(encoded)
            sha256.update(encoded)
            n_tokens += tokens.size
            n_bytes += sum(len(document.encode("utf-8")) for document in batch) + len(batch)
            n_documents += len(batch)
    return {
        "file": bin_path.name,
        "n_tokens": int(n_tokens),
        "bytes": int(n_bytes),
        "documents": n_documents,
        "sha256": sha256.hexdigest(),
    }
