"""An export appears complete or not at all: it is written under a hidden temporary name beside its target and
renamed; a failure removes the temporary and any folder made for it."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from lit_modules.config.errors import ConfigError


def refuse_existing(target: Path) -> None:
    """An export never overwrites: a user's folder or file may hold anything."""
    if Path(target).exists():
        raise ConfigError(f"{target} already exists; export into a new path (nothing was written).")


def refuse_unwritable(target: Path) -> None:
    """The nearest existing folder above `target` takes a new folder (tried, then removed): permission bits alone
    say nothing to root, and /proc, a read-only mount or a full disk answer only to a real attempt."""
    target = Path(target).absolute()
    ancestor = next(p for p in target.parents if p.exists())
    if not ancestor.is_dir():
        raise ConfigError(f"{target} cannot be written: {ancestor} is a file, not a folder; export into a folder "
                          "you can write (nothing was read).")
    try:
        probe = tempfile.mkdtemp(prefix=f".{target.name}.probe-", dir=ancestor)
    except OSError as err:
        raise ConfigError(f"{target} cannot be written: {ancestor} takes no new folder ({err.strerror or err}); "
                          "export into a folder you can write (nothing was read).") from None
    os.rmdir(probe)


def _make_parents(folder: Path) -> list[Path]:
    """mkdir -p `folder`; the folders it made, deepest first (what a failure removes again)."""
    missing = [p for p in [folder, *folder.parents] if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A temporary folder beside `target`, renamed onto it if the block succeeds, removed if it fails."""
    target = Path(target)
    refuse_existing(target)
    refuse_unwritable(target)
    made = _make_parents(target.parent)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        temp.mkdir()
        yield temp
        os.replace(temp, target)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        _remove_empty(made)
        raise


@contextlib.contextmanager
def staged_file(target: Path) -> Iterator[Path]:
    """A temporary file name beside `target`, renamed onto it if the block succeeds, removed if it fails."""
    target = Path(target)
    refuse_existing(target)
    refuse_unwritable(target)
    made = _make_parents(target.parent)
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        yield temp
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        _remove_empty(made)
        raise
