"""The text_files source: whole files held out, a single file cut into sections."""

from pathlib import Path

from lit_modules.data import DataConfig, prepare_corpus
from lit_modules.data.documents import iter_documents
from tests.helpers.data import write_text_files


def test_text_files_hold_out_whole_files(tmp_path):
    paths = write_text_files(tmp_path / "src", 8)
    corpus = prepare_corpus(
        DataConfig(
            name="mine",
            source="text_files",
            data_files=paths,
            cache_dir=str(tmp_path / "cache"),
            heldout_fraction=0.25,
        )
    )
    heldout = corpus.provenance["origin"]["heldout_documents"]
    assert 1 <= len(heldout) < 8
    heldout_docs = set(iter_documents(corpus.heldout_path))
    assert heldout_docs == {Path(path).read_text().strip() for path in heldout}
    assert not heldout_docs & set(iter_documents(corpus.train_path))


def test_single_text_file_is_cut_into_sections(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("\n\n".join(f"Paragraph {i} says something." for i in range(500)), encoding="utf-8")
    corpus = prepare_corpus(
        DataConfig(
            name="book", source="text_files", data_files=[str(path)], cache_dir=str(tmp_path / "cache")
        )
    )
    files = corpus.provenance["files"]
    assert files["train.txt"]["documents"] + files["heldout.txt"]["documents"] >= 50
    assert (
        0.02
        < files["heldout.txt"]["chars"] / (files["train.txt"]["chars"] + files["heldout.txt"]["chars"])
        < 0.1
    )
