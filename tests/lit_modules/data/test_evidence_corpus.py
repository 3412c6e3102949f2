"""The evidence corpus (data=evidence_en): its package reader, its R reader, its pins, its per-source held-out
split, and the refusal of a cached corpus whose text no longer matches its checksum (one sentence, exit 2)."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest

from lit_modules.config.data import DataConfig
from lit_modules.data import corpus as corpus_module
from lit_modules.data import evidence_corpus
from lit_modules.data.debian_packages import DebPackage, deb_members, fetch_deb
from lit_modules.data.documents import format_document
from lit_modules.data.hashing import fingerprint, sha256_file
from lit_modules.data.r_strings import read_character_vectors
from lit_modules.errors import DataError
from tests.helpers.data import assert_one_sentence
from tests.helpers.runs import REPO


def _ar(members: dict[str, bytes]) -> bytes:
    out = bytearray(b"!<arch>\n")
    for name, body in members.items():
        out += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode()
        out += body + (b"\n" if len(body) % 2 else b"")
    return bytes(out)


def _tar_xz(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as archive:
        for name, body in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def test_a_deb_is_read_member_by_member(tmp_path):
    deb = tmp_path / "demo_1.0_all.deb"
    deb.write_bytes(_ar({"debian-binary": b"2.0\n", "control.tar.xz": _tar_xz({"control": b"Package: demo\n"}),
                         "data.tar.xz": _tar_xz({"usr/share/doc/demo/a.txt": b"odd", "usr/b": b"even"})}))
    assert list(deb_members(deb)) == [("usr/share/doc/demo/a.txt", b"odd"), ("usr/b", b"even")]
    not_deb = tmp_path / "x.deb"
    not_deb.write_bytes(b"PK\x03\x04")
    with pytest.raises(DataError) as refused:
        list(deb_members(not_deb))
    assert_one_sentence(str(refused.value))


def test_a_downloaded_deb_with_another_sha256_is_refused(tmp_path, monkeypatch):
    """apt-get is the real client; here a stand-in on PATH serves other bytes under the pinned name."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text("#!/bin/sh\nprintf 'not the package' > demo_1.0_all.deb\n")
    (bin_dir / "apt-get").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    package = DebPackage("demo", "1.0", "0" * 64)
    with pytest.raises(DataError) as refused:
        fetch_deb(package, tmp_path / "downloads")
    assert_one_sentence(str(refused.value))
    assert "sha256" in str(refused.value) and not (tmp_path / "downloads" / package.file_name).exists()


def _xdr_character_vector(strings: list[str | None], latin1: bool = False) -> bytes:
    body = b"X\n" + struct.pack(">iii", 3, 0x40201, 0x30500) + struct.pack(">i", 5) + b"UTF-8"
    body += struct.pack(">ii", 16, len(strings))
    for text in strings:
        if text is None:
            body += struct.pack(">ii", 9, -1)
        else:
            raw = text.encode("latin-1" if latin1 else "utf-8")
            body += struct.pack(">ii", 9 | ((4 if latin1 else 8) << 12), len(raw)) + raw
    return struct.pack(">I", len(body)) + zlib.compress(body)


def test_r_character_vectors_are_read_without_r():
    rdb = _xdr_character_vector(["EMMA", "", None, "Chapter 1", "caf\u00e9"]) + _xdr_character_vector(
        ["na\u00efve"], latin1=True)
    assert read_character_vectors(rdb=rdb) == [["EMMA", "", "Chapter 1", "caf\u00e9"], ["na\u00efve"]]
    with pytest.raises(DataError):
        read_character_vectors(rdb=struct.pack(">I", 3) + zlib.compress(b"RDX"))


def test_text_that_does_not_match_its_pin_is_refused_in_one_sentence():
    with pytest.raises(DataError) as refused:
        evidence_corpus._checked("austen", [("austen/emma/000", "Not what Austen wrote.")])
    assert_one_sentence(str(refused.value))
    assert "austen" in str(refused.value) and "nothing was written" in str(refused.value)
    assert all(len(pin) == 64 for pin in evidence_corpus.TEXT_SHA256.values())


def test_every_source_keeps_a_held_out_share():
    cfg = DataConfig(name="evidence_en", heldout_fraction=0.01)
    keyed = [(f"{source}/{i:03d}", "x" * size) for source, count, size in
             (("shakespeare", 38, 130_000), ("austen", 269, 15_000), ("linux_doc", 2841, 7_500),
              ("perl_doc", 202, 43_000)) for i in range(count)]
    held = corpus_module._heldout_keys(cfg, keyed)
    for source in ("shakespeare", "austen", "linux_doc", "perl_doc"):
        mine = [k for k in held if k.startswith(source + "/")]
        total = sum(len(t) for k, t in keyed if k.startswith(source + "/"))
        assert mine and sum(len(t) for k, t in keyed if k in mine) <= 0.05 * total


def _fake_prepared_cache(cache: Path) -> Path:
    """A prepared evidence_en cache as prepare_corpus leaves one, with two short split files."""
    cfg = DataConfig(name="evidence_en", heldout_fraction=0.01, cache_dir=str(cache))
    folder = cache / "corpora" / "evidence_en"
    folder.mkdir(parents=True)
    files = {}
    for name, text in (("train.txt", "To be, or not to be."), ("heldout.txt", "It is a truth universally.")):
        (folder / name).write_bytes(format_document(text).encode())
        files[name] = {"sha256": sha256_file(folder / name), "documents": 1, "chars": len(text), "bytes": len(text)}
    (folder / "provenance.json").write_text(json.dumps({
        "name": "evidence_en", "source": "embedded", "settings": corpus_module._settings(cfg), "origin": {},
        "files": files, "fingerprint": fingerprint("evidence_en", files["train.txt"]["sha256"],
                                                   files["heldout.txt"]["sha256"])}))
    return folder


def test_an_altered_cached_corpus_is_refused_in_one_sentence_with_exit_2(tmp_path):
    folder = _fake_prepared_cache(tmp_path)
    train = folder / "train.txt"
    train.write_bytes(train.read_bytes().replace(b"not", b"NOT"))
    done = subprocess.run([sys.executable, "-m", "lit_modules.data.evidence_prepare", "--cache-dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr
    message = done.stderr.strip().removeprefix("error: ")
    assert_one_sentence(message)
    assert "does not match its recorded checksum" in message and str(train) in message
    assert done.stdout == ""


def test_the_prepared_corpus_matches_its_pins_and_holds_the_largest_budget():
    """On a machine where `make evidence-corpus` ran: the recorded provenance names every package and pin."""
    record = REPO / "data" / "cache" / "corpora" / "evidence_en" / "provenance.json"
    if not record.exists():
        pytest.skip("the evidence corpus is not prepared here (make evidence-corpus)")
    provenance = json.loads(record.read_text())
    sources = {s["source"]: s for s in provenance["origin"]["sources"]}
    assert {k: s["text_sha256"] for k, s in sources.items()} == evidence_corpus.TEXT_SHA256
    assert {s["package"]: s["version"] for s in sources.values() if s["client"] == "apt-get download"} == {
        p.name: p.version for p in evidence_corpus.PACKAGES}
    # 140 tokens per parameter of the largest rung that runs the 140-TPP regime (l4, docs/ladder.md), in bytes
    assert provenance["files"]["train.txt"]["bytes"] > 140 * 213_568
