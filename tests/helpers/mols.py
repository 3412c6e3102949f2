"""MoLS runs for the MoLS training tests: a Lightning callback that watches a run (per-step learning rates,
and whether the estimate changed anything it must not: weights, optimizer state, .grad, torch RNG), exact
equality of nested state, and the short run those tests train."""

from __future__ import annotations

import copy

import lightning as L
import torch

from lit_modules.config.composition import compose_run_config
from lit_modules.techniques.mols.callback import MoLSCallback
from lit_modules.train import run
from tests.helpers.runs import tiny_overrides


def same(a, b) -> bool:
    """Exact, recursive equality of (nested) tensors, dicts, lists and scalars."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def optimizer_states(state_dict: dict) -> list:
    """The per-parameter state (moments, step counts) of an optimizer or of each child of a composite."""
    children = state_dict.get("children", [state_dict])
    return [child["state"] for child in children]


class MoLSProbe(L.Callback):
    def __init__(self, estimate_step: int | None = None):
        self.estimate_step = estimate_step
        self.snapshot: dict | None = None
        self.unchanged: dict[str, bool] = {}
        self.estimated_at_check = False
        self.lrs: dict[int, dict[str, tuple[float, float, float]]] = {}  # step -> group -> (lr, lr_scale, wd)
        self.final_weights: dict[str, torch.Tensor] = {}
        self.mols: MoLSCallback | None = None

    @staticmethod
    def _state(trainer: L.Trainer, pl_module) -> dict:
        params = list(pl_module.model.named_parameters())
        return {
            "weights": {n: p.detach().clone() for n, p in params},
            "grads": {n: None if p.grad is None else p.grad.clone() for n, p in params},
            "optimizer_state": copy.deepcopy(trainer.optimizers[0].state_dict()),
            "rng": torch.get_rng_state(),
        }

    def on_train_start(self, trainer: L.Trainer, pl_module) -> None:
        self.mols = next((c for c in trainer.callbacks if isinstance(c, MoLSCallback)), None)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx: int) -> None:
        if self.estimate_step is not None and trainer.global_step == self.estimate_step:
            self.snapshot = self._state(trainer, pl_module)  # what MoLS sees before its estimate

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx: int) -> None:
        # Runs after MoLS's hook: extra callbacks come after the technique callbacks.
        if self.snapshot is not None and trainer.global_step == self.estimate_step:
            after = self._state(trainer, pl_module)
            self.unchanged = {k: same(self.snapshot[k], after[k]) for k in after}
            # param_groups carry lr_scale, which MoLS is meant to change; the state must not move.
            self.unchanged["optimizer_state"] = same(
                optimizer_states(self.snapshot["optimizer_state"]), optimizer_states(after["optimizer_state"])
            )
            self.estimated_at_check = bool(self.mols and self.mols.estimated)
            self.snapshot = None

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.lrs[trainer.global_step] = {
            g["name"]: (g["lr"], g["lr_scale"], g["weight_decay"]) for g in trainer.optimizers[0].param_groups
        }

    def on_train_end(self, trainer, pl_module) -> None:
        self.final_weights = {n: p.detach().clone() for n, p in pl_module.model.named_parameters()}


STEPS, WARMUP, AT = 16, 8, 2
GROUPS = ("emb", "qk", "vo", "mlp", "head")
MOLS = ("mols=snr", f"techniques.mols.estimate_step={AT}", "techniques.mols.extra_micro_batches=4")


def overrides(runs_dir, *extra: str) -> list[str]:
    return [
        *tiny_overrides(
            runs_dir, steps=STEPS, **{"trainer.log_every_n_steps": "1", "trainer.val_every_n_steps": "100"}
        ),
        "schedule.warmup_fraction=0.5",
        *extra,
    ]


def mols_run(runs_dir, *extra: str):
    probe = MoLSProbe(estimate_step=AT)
    cfg = compose_run_config(overrides(runs_dir, *MOLS, *extra))
    result = run(cfg, extra_callbacks=[probe])
    assert result.status == "FINISHED"
    return result, probe
