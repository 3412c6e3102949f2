"""The Trainer's checkpoint IO: every checkpoint Lightning restores or saves goes through the verified files
of lit_modules.verified_checkpoint (kept out of that module so that reading a run loads no Lightning)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lightning.pytorch.plugins.io import TorchCheckpointIO

from lit_modules.verified_checkpoint import checksum_path, commit_checkpoint, load_verified_checkpoint


class VerifiedCheckpointIO(TorchCheckpointIO):
    """The Trainer's checkpoint IO: `fit(ckpt_path=...)` restores only a verified checkpoint, and whatever
    Lightning itself saves through it (ddp_spawn hands rank 0's weights back in a file) gets a checksum."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path, storage_options=None) -> None:
        path = Path(path)
        written = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        super().save_checkpoint(checkpoint, written, storage_options)
        commit_checkpoint(written, path)

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict[str, Any]:
        return load_verified_checkpoint(Path(path))

    def remove_checkpoint(self, path) -> None:
        super().remove_checkpoint(path)
        checksum_path(Path(path)).unlink(missing_ok=True)
