"""Concurrent prepares of one cache (DDP ranks): one builds under the lock, the others wait and reuse it."""

from lit_modules.data import DataConfig, TokenizerConfig, build_tokenizer, prepare_corpus, prepare_shards
from tests.helpers.data import write_text_files


def _prepare_in_child(args):
    paths, cache = args
    corpus = prepare_corpus(
        DataConfig(
            name="shared", source="text_files", data_files=paths, cache_dir=cache, heldout_fraction=0.3
        )
    )
    tokenizer = build_tokenizer(TokenizerConfig(kind="bpe", vocab_size=300), corpus)
    return prepare_shards(corpus, tokenizer).key


def test_concurrent_prepares_agree(tmp_path):
    """DDP ranks preparing the same cache at once: one builds, the others wait and reuse it."""
    import multiprocessing

    paths = write_text_files(tmp_path / "src", 6)
    with multiprocessing.get_context("fork").Pool(3) as pool:
        keys = pool.map(_prepare_in_child, [(paths, str(tmp_path / "cache"))] * 3)
    assert len(set(keys)) == 1
    leftovers = [p.name for p in (tmp_path / "cache").rglob("*") if ".tmp-" in p.name]
    assert leftovers == []
