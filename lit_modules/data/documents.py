"""The on-disk text form shared by every corpus, and the rule for holding documents out.

A split file (`train.txt`, `heldout.txt`) is UTF-8 plain text: documents in order,
each followed by a line holding only the ASCII record separator (U+001E). Documents
are normalised first: `\\r\\n` and `\\r` become `\\n`, U+001E is removed and
surrounding whitespace is stripped, so the separator line is unambiguous and the
file still reads as ordinary text in any editor.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from .hashing import sha256_text

DOCUMENT_SEPARATOR = "\x1e"
_SEPARATOR_LINE = DOCUMENT_SEPARATOR + "\n"
# Opening split files without newline translation keeps the bytes we count exact.
SPLIT_FILE_OPEN_ARGS = {"encoding": "utf-8", "newline": ""}


def normalize_document(text: str) -> str:
    """Canonical form of a document; an empty result means "skip it"."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace(DOCUMENT_SEPARATOR, "")
    return text.strip()


def format_document(document: str) -> str:
    """The text a normalised document occupies in a split file."""
    return document + "\n" + _SEPARATOR_LINE


def iter_documents(path: str | Path) -> Iterator[str]:
    """Stream the documents of a split file without loading it whole."""
    lines: list[str] = []
    with open(path, **SPLIT_FILE_OPEN_ARGS) as handle:
        for line in handle:
            if line == _SEPARATOR_LINE:
                yield "".join(lines)[:-1]  # drop the newline written before the separator
                lines = []
            else:
                lines.append(line)
    tail = "".join(lines).strip()
    if tail:
        yield tail  # tolerate a hand-written file whose last separator is missing


def choose_heldout(sized_keys: Sequence[tuple[str, int]], fraction: float) -> set[str]:
    """Pick whole documents to hold out so that about `fraction` of the characters are held out.

    Documents are visited in the order of the sha256 of their key (a fixed shuffle
    that does not depend on the text) and added while that brings the held-out
    share closer to the target. At least one document is held out and at least
    one is kept for training; fewer than two documents cannot be split.
    """
    if len(sized_keys) < 2:
        return set()
    target = fraction * sum(size for _, size in sized_keys)
    chosen: set[str] = set()
    heldout_chars = 0
    for key, size in sorted(sized_keys, key=lambda item: sha256_text(item[0])):
        closer = abs(heldout_chars + size - target) < abs(heldout_chars - target)
        if chosen and not closer:
            break
        chosen.add(key)
        heldout_chars += size
        if len(chosen) == len(sized_keys) - 1:
            break
    return chosen
