"""Checkpoints that prove their integrity: a sha256 file beside each one, checked before every load.

`last.ckpt.sha256` holds `sha256sum` lines (`<hex>  last.ckpt`), so `sha256sum -c` checks it by hand. A
checkpoint and its checksum are two files and no rename moves both at once, so `commit_checkpoint`
orders its steps such that at every instant (and after a crash at any point) the checksum file accepts
whatever `last.ckpt` holds:

    1. the new checkpoint is complete and fsynced under a temporary name; its digest is computed;
    2. the checksum file is replaced by one that accepts the old AND the new digest;
    3. the temporary file is renamed onto `last.ckpt`;
    4. the checksum file is replaced by one that accepts only the new digest.

Each replace is tmp + fsync + rename + fsync of the folder, so the order survives a power cut too. A
truncated or bit-flipped file matches neither digest and is refused; a same-size flip included.

`load_verified_checkpoint` is the one way a finished or paused run's checkpoint is read: resume (through
`callbacks.checkpoint_io.VerifiedCheckpointIO`, the Trainer's checkpoint IO), evaluation, PC export,
fine-tuning and `init_from`. Neither torch nor Lightning loads here until a checkpoint is read: the verbs
that look a run up refuse a bad one before the training stack is imported.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lit_modules.config.errors import ConfigError
from lit_modules.data.hashing import sha256_file

CHECKSUM_SUFFIX = ".sha256"


class CheckpointError(ConfigError):
    """A checkpoint that cannot be trusted or read: refused in one sentence (exit 2), nothing is changed."""


def checksum_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + CHECKSUM_SUFFIX)


def commit_checkpoint(written: Path, checkpoint: Path) -> str:
    """Move the fully written file `written` onto `checkpoint` with its checksum; returns the digest."""
    _fsync(written)
    digest = sha256_file(written)
    sums = checksum_path(checkpoint)
    previous = _accepted_digests(sums) if checkpoint.is_file() else []
    _replace_durably(sums, _sums_text([digest, *previous], checkpoint.name))
    os.replace(written, checkpoint)
    checksum_path(written).unlink(missing_ok=True)  # written through the checkpoint IO, it had its own
    _fsync_dir(checkpoint.parent)
    _replace_durably(sums, _sums_text([digest], checkpoint.name))
    return digest


def verify_checkpoint(checkpoint: Path) -> str:
    """The checkpoint's digest if its checksum file accepts it; CheckpointError otherwise."""
    checkpoint = Path(checkpoint)
    sums = checksum_path(checkpoint)
    if not checkpoint.is_file():
        raise CheckpointError(f"There is no checkpoint file {checkpoint}.")
    if not sums.is_file():
        raise CheckpointError(
            f"The checkpoint {checkpoint} has no checksum file {sums.name} beside it, so it cannot be "
            f"checked for damage; if you trust it, write one with `sha256sum {checkpoint.name} > "
            f"{sums.name}` in {checkpoint.parent}."
        )
    digest = sha256_file(checkpoint)
    if digest not in _accepted_digests(sums):
        raise CheckpointError(
            f"The checkpoint {checkpoint} does not match its checksum in {sums.name} (the file is truncated "
            "or altered), so it is not loaded; restore it from a copy or train the run again."
        )
    return digest


def load_verified_checkpoint(checkpoint: Path) -> dict[str, Any]:
    """The checkpoint's contents (on the CPU), after its checksum has been verified."""
    import torch

    checkpoint = Path(checkpoint)
    verify_checkpoint(checkpoint)
    try:
        return torch.load(checkpoint, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - a foreign file with a matching checksum someone wrote
        raise CheckpointError(
            f"The checkpoint {checkpoint} matches its checksum but cannot be read as a training checkpoint "
            f"({type(err).__name__})."
        ) from err


def _accepted_digests(sums: Path) -> list[str]:
    if not sums.is_file():
        return []
    return [line.split()[0].lower() for line in sums.read_text().splitlines() if line.strip()]


def _sums_text(digests: list[str], name: str) -> str:
    unique = list(dict.fromkeys(digests))
    return "".join(f"{digest}  {name}\n" for digest in unique)


def _replace_durably(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    _fsync_dir(path.parent)


def _fsync(path: Path) -> None:
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
