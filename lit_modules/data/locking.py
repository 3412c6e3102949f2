"""An inter-process lock around building one cache entry.

DDP ranks (and parallel sweep trials) may all ask for the same corpus, tokenizer
or shards at once; the first builds while the others wait and then reuse it.
Uses POSIX `flock`, which covers processes on one machine; where it is missing
the lock is a no-op and atomic writes still keep every file whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX platforms
    fcntl = None


@contextlib.contextmanager
def build_lock(directory: str | Path) -> Iterator[None]:
    """Hold an exclusive lock for building `directory` (a `.<name>.lock` file beside it)."""
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / f".{directory.name}.lock", "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
