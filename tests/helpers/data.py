"""Shared by the data-layer tests (tests/lit_modules/data/): the datamodule's shape, one-sentence errors,
and small text-file corpora made in the test."""

from __future__ import annotations

from pathlib import Path

SEQ_LEN, BATCH = 32, 4  # the session datamodule's windows (tests/lit_modules/data/conftest.py)


def assert_one_sentence(message: str) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert message and not message[0].isspace() and message.endswith("."), message


def write_text_files(folder: Path, count: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"doc{i}.txt"
        path.write_text(f"Document number {i}.\n" + f"line {i} of some text\n" * (20 + i), encoding="utf-8")
        paths.append(str(path))
    return paths
