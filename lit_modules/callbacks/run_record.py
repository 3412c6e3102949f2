"""What a checkpoint must carry to rebuild and continue its run: config, run id, RNG states."""

from __future__ import annotations

import random

import lightning as L
import numpy as np
import torch

RECORD_KEY = "run_record"


class RunRecord(L.Callback):
    def __init__(self, resolved_config: dict, run_id: str | None, config_hash: str):
        self.resolved_config = resolved_config
        self.run_id = run_id
        self.config_hash = config_hash

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module, checkpoint: dict) -> None:
        checkpoint[RECORD_KEY] = {
            "config": self.resolved_config,
            "mlflow_run_id": self.run_id,
            "config_hash": self.config_hash,
            # Plain tensors and lists only, so the checkpoint loads with torch.load(weights_only=True).
            "rng": {
                "torch": torch.get_rng_state(),
                "numpy": _numpy_state(),
                "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
            },
        }

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module, checkpoint: dict) -> None:
        rng = checkpoint.get(RECORD_KEY, {}).get("rng")
        if rng:
            torch.set_rng_state(rng["torch"])
            kind, keys, pos, has_gauss, gauss = rng["numpy"]
            np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
            version, state, gauss_next = rng["python"]
            random.setstate((version, tuple(state), gauss_next))


def _numpy_state() -> list:
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return [kind, keys.tolist(), int(pos), int(has_gauss), float(gauss)]
