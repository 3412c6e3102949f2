"""The python_docs source (pydoc_data.topics, offline)."""

from lit_modules.data import DataConfig, prepare_corpus


def test_python_docs_corpus(tmp_path):
    corpus = prepare_corpus(DataConfig(name="python_docs", cache_dir=str(tmp_path)))
    assert corpus.provenance["origin"]["module"] == "pydoc_data.topics"
    train_text = corpus.train_path.read_text(encoding="utf-8")
    assert "statement" in train_text and corpus.provenance["files"]["heldout.txt"]["documents"] >= 1
