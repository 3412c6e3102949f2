"""The MoLS training hook: measure group SNRs once early in warmup, then ramp each group's LR multiplier.

At the first micro-batch of optimizer step `estimate_step` (after that many steps), the callback draws K
extra micro-batches, measures per-group gradient SNRs without touching weights, `.grad`, optimizer state
or RNG streams, and turns them into alphas. From then on, before every optimizer step t, it sets
`group["lr_scale"] = base_scale x ramp(t)` for every AdamW-managed torch group of a scaled MoLS group,
and rescales that group's current `lr` by the same ratio, so step t runs at exactly
peak_lr x schedule(t) x lr_scale (the scheduler has already computed this step's LR with the old scale).

Alphas, SNRs and each touched group's original lr_scale/weight_decay live in `state_dict()`, which
Lightning stores in checkpoints, so a resumed run sets the same multipliers at the same steps.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn

from lit_modules.techniques.mols.scaling import alpha_from_snr, planned_steps, ramp
from lit_modules.optim.registry import adam_family
from lit_modules.techniques.mols.snr import group_snr, measure_gradient_moments

BatchSource = Callable[[L.Trainer, int, "int | None"], list]


def disjoint_training_windows(trainer: L.Trainer, count: int, micro_batch_size: int | None) -> list:
    """K micro-batches of training windows at sample ids the run never reads (past its whole budget).

    Same corpus, same seed, same window sampler as training, so the SNR describes the training
    distribution; deterministic, so every rank (and a resumed run) measures on the same data.
    """
    dm = trainer.datamodule
    size = micro_batch_size or dm.batch_size
    samples_in_budget = trainer.max_steps * dm.batch_size * trainer.world_size * dm.accumulate_grad_batches
    first = math.ceil(samples_in_budget / size)  # micro-batch m of this stream reads ids [m*size, (m+1)*size)
    return dm.train_batches(size, first, count)


def _groups_with_manager(trainer: L.Trainer) -> Iterator[tuple[dict, bool]]:
    """Every torch param group, with whether an Adam-family optimizer steps it."""
    family = adam_family()  # the classes every registered optimizer declares Adam-like
    for optimizer in trainer.optimizers:
        for child in getattr(optimizer, "optimizers", [optimizer]):
            adam = isinstance(child, family)
            for group in child.param_groups:
                yield group, adam


class MoLSCallback(L.Callback):
    def __init__(
        self,
        *,
        groups: list[str],
        family_to_group: Callable[[str], str],
        base_group: str = "vo",
        estimator: str = "per_coord",
        eps: float = 1e-3,
        debias: bool = False,
        ignore_dead_coords: bool = True,
        extra_micro_batches: int = 8,
        micro_batch_size: int | None = None,
        estimate_step: int | None = None,
        estimate_fraction: float = 0.01,
        warmup_steps: int | None = None,
        warmup_fraction: float = 0.05,
        ramp_shape: str = "linear",
        clip_min: float | None = None,
        clip_max: float | None = None,
        decay_follows_lr: bool = True,
        manual_alphas: dict[str, float] | None = None,
        batch_source: BatchSource = disjoint_training_windows,
    ):
        self.groups = list(groups)
        self.family_to_group = family_to_group
        self.base_group = base_group
        self.estimator, self.eps, self.debias, self.ignore_dead = estimator, eps, debias, ignore_dead_coords
        self.k, self.micro_batch_size = extra_micro_batches, micro_batch_size
        self.estimate_step, self.estimate_fraction = estimate_step, estimate_fraction
        self.warmup_steps, self.warmup_fraction = warmup_steps, warmup_fraction
        self.ramp_shape, self.clip_min, self.clip_max = ramp_shape, clip_min, clip_max
        self.decay_follows_lr = decay_follows_lr
        self.batch_source = batch_source
        # State (checkpointed). Manual mode: alphas known up front, applied from step 0 without a ramp.
        self.manual = manual_alphas is not None
        self.alpha: dict[str, float] = dict(manual_alphas or {})
        self.snr: dict[str, float] = {}
        self.estimated = self.manual
        self.start_step = 0
        self.estimate_seconds = 0.0
        self.base: dict[str, list[float]] = {}  # torch group name -> [lr_scale, weight_decay] before MoLS
        self._warmup_end = 0
        self._every = 1

    # --- schedule -----------------------------------------------------------------------------
    def planned_steps(self, total_steps: int) -> tuple[int, int]:
        """(estimation step, end of warmup) for a run of `total_steps`, as budget.py lays out warmup."""
        return planned_steps(total_steps, self.warmup_steps, self.warmup_fraction, self.estimate_step,
                             self.estimate_fraction)

    def multiplier(self, group: str, step: int) -> float:
        alpha = self.alpha.get(group, 1.0)
        if self.manual:
            return alpha
        return ramp(step, self.start_step, self._warmup_end, alpha, self.ramp_shape)

    # --- hooks --------------------------------------------------------------------------------
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        at, self._warmup_end = self.planned_steps(trainer.max_steps)
        if not self.manual and not self.estimated:
            if at >= self._warmup_end:
                raise ValueError(
                    f"MoLS estimates at step {at}, which is not before the end of warmup "
                    f"(step {self._warmup_end})."
                )
            self.start_step = at
        self._every = max(1, trainer.log_every_n_steps)

    def on_train_batch_start(
        self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int
    ) -> None:
        step = trainer.global_step
        if not self.estimated and step >= self.start_step:
            self._estimate(trainer, pl_module, step)
        if self.estimated:
            first_micro_batch = batch_idx % trainer.accumulate_grad_batches == 0
            self._apply(trainer, step, log=first_micro_batch and step % self._every == 0)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.manual and trainer.global_step == 0 and trainer.logger is not None:
            trainer.logger.log_metrics({f"mols/alpha/{g}": a for g, a in self.alpha.items()}, step=0)

    # --- estimation ---------------------------------------------------------------------------
    def _params_by_group(self, trainer: L.Trainer) -> dict[str, list[torch.nn.Parameter]]:
        by_group: dict[str, list[torch.nn.Parameter]] = {g: [] for g in self.groups}
        for group, _ in _groups_with_manager(trainer):
            name = self.family_to_group(group.get("family", "other"))
            if name in by_group:
                by_group[name] += [p for p in group["params"] if p.requires_grad]
        return by_group

    def _estimate(self, trainer: L.Trainer, pl_module: L.LightningModule, step: int) -> None:
        device = pl_module.device
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        batches = self.batch_source(trainer, self.k, self.micro_batch_size)
        by_group = self._params_by_group(trainer)
        empty = [g for g, ps in by_group.items() if not ps]
        if empty:
            rank_zero_warn(f"MoLS groups without parameters (kept at alpha 1): {', '.join(empty)}.")
        if not by_group.get(self.base_group):
            raise ValueError(f"The MoLS base group '{self.base_group}' has no parameters in this model.")

        def loss_fn(batch) -> torch.Tensor:
            moved = tuple(t.to(device) for t in batch)
            with trainer.precision_plugin.train_step_context():
                return pl_module.training_objective(moved)[0]  # the gradient the run follows

        moments = measure_gradient_moments(loss_fn, batches, by_group)
        snr = {
            g: group_snr(m, self.estimator, self.eps, self.debias, self.ignore_dead)
            for g, m in moments.items()
        }
        snr = trainer.strategy.broadcast(snr, src=0)  # every rank must apply identical multipliers
        base = snr[self.base_group]
        self.snr = snr
        self.alpha = {g: alpha_from_snr(s, base, self.clip_min, self.clip_max) for g, s in snr.items()}
        self.estimated, self.start_step = True, step
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        self.estimate_seconds = time.perf_counter() - started
        metrics = {"mols/estimate_seconds": self.estimate_seconds}
        metrics.update({f"mols/snr/{g}": s for g, s in snr.items()})
        metrics.update({f"mols/alpha/{g}": a for g, a in self.alpha.items()})
        if trainer.logger is not None:
            trainer.logger.log_metrics(metrics, step=max(step - 1, 0))  # measured after step-1 steps

    # --- application --------------------------------------------------------------------------
    def _apply(self, trainer: L.Trainer, step: int, log: bool = False) -> None:
        applied: dict[str, float] = {}
        for group, adam in _groups_with_manager(trainer):
            name = self.family_to_group(group.get("family", "other"))
            if not adam or name not in self.alpha:
                continue  # Muon-managed or not scaled: MoLS's rule is about Adam's noise damping
            factor = self.multiplier(name, step)
            base_scale, base_wd = self.base.setdefault(
                group["name"], [group["lr_scale"], group["weight_decay"]]
            )
            new, old = base_scale * factor, group["lr_scale"]
            if new != old:
                group["lr_scale"] = new
                if old != 0:
                    group["lr"] = group["lr"] * (new / old)
            if not self.decay_follows_lr and factor > 0:
                group["weight_decay"] = base_wd / factor  # keeps lr x wd as without MoLS
            applied[name] = factor
        if log and applied and trainer.logger is not None:
            trainer.logger.log_metrics({f"mols/lr_scale/{g}": f for g, f in applied.items()}, step=step)

    # --- checkpoint state ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "estimated": self.estimated,
            "start_step": self.start_step,
            "snr": dict(self.snr),
            "alpha": dict(self.alpha),
            "estimate_seconds": self.estimate_seconds,
            "base": {k: list(v) for k, v in self.base.items()},
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.estimated = bool(state_dict["estimated"])
        self.start_step = int(state_dict["start_step"])
        self.snr = dict(state_dict["snr"])
        self.alpha = dict(state_dict["alpha"])
        self.estimate_seconds = float(state_dict["estimate_seconds"])
        self.base = {k: list(v) for k, v in state_dict["base"].items()}
