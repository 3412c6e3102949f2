"""The user's own plain-text files as a corpus.

With two or more files, each file is one document, so held-out text comes from
whole files. A single file is cut at blank lines into about SECTIONS_PER_FILE
contiguous sections, each one document, so held-out text is a few whole stretches
of the file rather than scattered paragraphs.
"""

from __future__ import annotations

import re
from pathlib import Path

from lit_modules.errors import DataError

SECTIONS_PER_FILE = 100
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def file_identity(path: str) -> dict:
    """What tells us a local file changed (cheap: no need to re-read it)."""
    resolved = Path(path).expanduser().resolve()
    if not resolved.is_file():
        raise DataError(f"The data file {path} does not exist or is not a file; fix data.data_files.")
    stat = resolved.stat()
    return {"path": str(resolved), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _read(path: str) -> str:
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(f"The data file {path} is not valid UTF-8 text; convert it to UTF-8 first.") from None


def _sections(text: str, count: int) -> list[str]:
    paragraphs = _PARAGRAPH_BREAK.split(text.replace("\r\n", "\n"))
    target = max(1, len(text) // count)
    sections, current, size = [], [], 0
    for paragraph in paragraphs:
        current.append(paragraph)
        size += len(paragraph)
        if size >= target:
            sections.append("\n\n".join(current))
            current, size = [], 0
    if current:
        sections.append("\n\n".join(current))
    return sections


def load_text_files(paths: list[str]) -> tuple[list[tuple[str, str]], dict]:
    """(key, text) documents from the given files, plus their provenance."""
    identities = [file_identity(path) for path in paths]
    if len(paths) == 1:
        documents = [
            (f"{paths[0]}#{i}", section)
            for i, section in enumerate(_sections(_read(paths[0]), SECTIONS_PER_FILE))
        ]
        unit = "section"
    else:
        documents = [(path, _read(path)) for path in paths]
        unit = "file"
    return documents, {"files": identities, "document_unit": unit}
