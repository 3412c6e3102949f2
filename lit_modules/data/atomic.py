"""Atomic file writes: a reader sees either the old file or the complete new one.

Every cached artifact (corpus text, tokenizer, token shards, manifests) is written
through here so that an interrupted prepare never leaves a half-written file under
its final name. Temp names are unique per process so concurrent DDP ranks that
prepare the same cache do not trample each other; the last `os.replace` wins and
the contents are identical because preparation is deterministic.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def _temp_name(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", **open_kwargs: Any) -> Iterator[IO]:
    """Open a temp file next to `path`; move it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _temp_name(path)
    try:
        with open(temp, mode, **open_kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        # Only present if something failed before the replace.
        temp.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def atomic_copy(source: str | Path, target: str | Path) -> None:
    with open(source, "rb") as src, atomic_open(target, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
