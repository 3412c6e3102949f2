"""An export appears complete or not at all: it is written into a hidden sibling folder and renamed."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

from lit_modules.config.errors import ConfigError


def refuse_existing(target: Path) -> None:
    """An export never overwrites: a user's folder or file may hold anything."""
    if Path(target).exists():
        raise ConfigError(f"{target} already exists; export into a new path (nothing was written).")


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A temporary folder beside `target`, renamed onto it if the block succeeds, removed if it fails."""
    target = Path(target)
    refuse_existing(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    temp.mkdir()
    try:
        yield temp
        os.replace(temp, target)
    finally:
        shutil.rmtree(temp, ignore_errors=True)  # only present if something failed before the rename
