"""prepare_shards: byte shards against the text, reuse, and a damaged shard refused in one sentence."""

import shutil

import numpy as np
import pytest

from lit_modules.data import DataError, TokenizerConfig, build_tokenizer, prepare_shards
from lit_modules.data.documents import iter_documents
from tests.helpers.data import assert_one_sentence


def test_byte_shards_match_the_text(corpus, shards):
    manifest = shards.manifest
    assert manifest["dtype"] == "uint16" and manifest["corpus"]["fingerprint"] == corpus.fingerprint
    heldout = shards.heldout_tokens()
    assert not heldout.flags.writeable
    assert heldout.size == manifest["splits"]["heldout"]["n_tokens"] == manifest["splits"]["heldout"]["bytes"]
    assert shards.bytes_per_token("heldout") == 1.0
    eos = 257
    assert (
        int((heldout == eos).sum()) == corpus.provenance["files"]["heldout.txt"]["documents"]
        and heldout[-1] == eos
    )
    first_doc = next(iter_documents(corpus.heldout_path)).encode("utf-8")
    assert bytes(heldout[: len(first_doc)].astype(np.uint8)) == first_doc


def test_shards_are_reused_and_verified(corpus, shards, tmp_path):
    tokenizer = build_tokenizer(TokenizerConfig(kind="byte"), corpus)
    assert prepare_shards(corpus, tokenizer).directory == shards.directory
    copy = tmp_path / "shards" / shards.key
    shutil.copytree(shards.directory, copy)
    with open(copy / "heldout.bin", "r+b") as handle:
        handle.write(b"\x00\x00")
    with pytest.raises(DataError) as error:
        prepare_shards(corpus, tokenizer, cache_dir=tmp_path)
    assert_one_sentence(str(error.value))
    assert "does not match its manifest" in str(error.value)
