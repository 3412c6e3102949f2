"""Tests for lit_modules.data.tokenization: byte, BPE (trained on train only) and pretrained tokenizers."""

import random
from pathlib import Path

import pytest

from lit_modules.data import (
    DataConfig,
    DataError,
    TokenizerConfig,
    build_tokenizer,
    prepare_corpus,
    static_vocab_size,
)
from lit_modules.data.tokenization import (
    ByteTokenizer,
    PretrainedTokenizer,
    Tokenizer,
    bpe_cache_path,
)

SAMPLES = [
    "",
    "Hello, world!",
    "  leading and trailing spaces  \n\n\ttabs\r\nand CRLF",
    "Ünïcödé: naïve café, Straße, Ελληνικά, русский, 日本語の文章, 한국어",
    "emoji 🤖🎭 and combining e\u0301 and zero-width\u200bjoiner",
    "control \x00\x01\x7f and a literal <|eos|> and <|endoftext|>",
]
WORDS = "the of and to in that is was he for it with as his on be at by had not are but from".split()


def write_corpus_files(folder: Path, count: int = 6) -> tuple[list[str], list[str]]:
    """Files of common words, each with its own frequent marker word; returns (paths, markers)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    paths, markers = [], []
    for i in range(count):
        marker = "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(9))
        words = [rng.choice(WORDS) for _ in range(3000)] + [marker] * 300
        rng.shuffle(words)
        path = folder / f"part{i}.txt"
        path.write_text(" ".join(words), encoding="utf-8")
        paths.append(str(path))
        markers.append(marker)
    return paths, markers


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    paths, markers = write_corpus_files(root / "src")
    corpus = prepare_corpus(
        DataConfig(
            name="words",
            source="text_files",
            data_files=paths,
            cache_dir=str(root / "cache"),
            heldout_fraction=0.3,
        )
    )
    return corpus, dict(zip(paths, markers))


@pytest.fixture(scope="module")
def bpe(small_corpus):
    return build_tokenizer(TokenizerConfig(kind="bpe", vocab_size=400), small_corpus[0])


def test_byte_tokenizer_round_trips_any_text():
    tokenizer = ByteTokenizer()
    for text in SAMPLES:
        ids = tokenizer.encode(text)
        assert ids == list(text.encode("utf-8")) and all(0 <= i < 256 for i in ids)
        assert tokenizer.decode(ids) == text
    assert tokenizer.decode([tokenizer.bos_id, 104, 105, tokenizer.eos_id]) == "hi"
    assert tokenizer.decode([0xFF, 104]) == "\ufffdh"  # invalid UTF-8 from a model never crashes
    assert tokenizer.vocab_size == static_vocab_size(TokenizerConfig(kind="byte")) == 259
    assert isinstance(tokenizer, Tokenizer)


def test_bpe_round_trips_and_has_the_requested_size(bpe):
    for text in SAMPLES:
        assert bpe.decode(bpe.encode(text)) == text
    # This tiny corpus runs out of merges before 400; the id space is still the requested size.
    assert bpe.vocab_size == 400 == static_vocab_size(TokenizerConfig(kind="bpe", vocab_size=400))
    assert 300 < bpe.learned_vocab_size < 400
    assert bpe.decode(bpe.encode("the") + [399]) == "the"  # unused ids decode to nothing
    assert bpe.eos_id not in bpe.encode("<|eos|>")  # text stays text
    assert len(bpe.encode(" the of and")) == 3  # frequent words became single tokens
    assert isinstance(bpe, Tokenizer) and bpe.name == "bpe-400"


def test_bpe_is_trained_on_the_train_split_only(small_corpus, bpe):
    corpus, markers = small_corpus
    heldout = set(corpus.provenance["origin"]["heldout_documents"])
    assert heldout and len(heldout) < len(markers)
    for path, marker in markers.items():
        pieces = len(bpe.encode(" " + marker))
        if path in heldout:
            assert pieces > 1, f"held-out marker {marker} was learned"
        else:
            assert pieces == 1, f"train marker {marker} was not learned"


def test_bpe_is_cached_per_corpus_and_vocab_size(small_corpus, bpe):
    corpus, _ = small_corpus
    path = bpe_cache_path(corpus.cache_dir, corpus.fingerprint, 400)
    assert path.exists()
    stamp = path.stat().st_mtime_ns
    again = build_tokenizer(TokenizerConfig(kind="bpe", vocab_size=400), corpus)
    assert again.fingerprint == bpe.fingerprint and path.stat().st_mtime_ns == stamp
    other = build_tokenizer(TokenizerConfig(kind="bpe", vocab_size=300), corpus)
    assert other.fingerprint != bpe.fingerprint != ByteTokenizer().fingerprint


def test_bpe_needs_a_corpus():
    with pytest.raises(DataError, match="needs the prepared corpus"):
        build_tokenizer(TokenizerConfig(kind="bpe"), None)


def test_pretrained_tokenizer_loads_a_saved_file(bpe, tmp_path):
    path = tmp_path / "tokenizer.json"
    bpe.save(path)
    cfg = TokenizerConfig(kind="pretrained", path=str(path))
    loaded = build_tokenizer(cfg, None)
    assert isinstance(loaded, PretrainedTokenizer)
    assert loaded.fingerprint == PretrainedTokenizer(path).fingerprint
    assert loaded.vocab_size == static_vocab_size(cfg) == bpe.learned_vocab_size
    assert (loaded.bos_id, loaded.eos_id) == (bpe.bos_id, bpe.eos_id)
    for text in SAMPLES:
        assert loaded.encode(text) == bpe.encode(text) and loaded.decode(loaded.encode(text)) == text


def test_pretrained_gpt2_style_tokenizer_uses_endoftext_for_bos_and_eos(tmp_path):
    from tokenizers import Tokenizer as Backend
    from tokenizers import models, pre_tokenizers

    backend = Backend(models.WordLevel({"hello": 0, "world": 1, "<unk>": 2}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.add_special_tokens(["<|endoftext|>"])
    path = tmp_path / "tokenizer.json"
    backend.save(str(path))
    tokenizer = PretrainedTokenizer(path)
    assert tokenizer.bos_id == tokenizer.eos_id == 3 and tokenizer.vocab_size == 4
    assert tokenizer.encode("hello world") == [0, 1]


@pytest.mark.parametrize("content", [None, "{not json", '{"valid": "json but not a tokenizer"}'])
def test_missing_or_corrupt_tokenizer_file_is_one_sentence(tmp_path, content):
    path = tmp_path / "tokenizer.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as error:
        build_tokenizer(TokenizerConfig(kind="pretrained", path=str(path)), None)
    message = str(error.value)
    assert "\n" not in message and message.endswith(".") and str(path) in message
    with pytest.raises(DataError):
        static_vocab_size(TokenizerConfig(kind="pretrained", path=str(path)))
