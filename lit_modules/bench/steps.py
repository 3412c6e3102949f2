"""Seconds per optimizer step of a composed config: our Lightning path, and the same work in a plain loop.

The timing primitives of `make bench` (lit_modules/bench/__main__.py) and of the technique rows that
technique folders add (e.g. techniques/pc_layer/bench.py).
"""

from __future__ import annotations

import time

import lightning as L
import torch
import torch.nn.functional as F

from lit_modules.build import build_data, build_model, build_module
from lit_modules.config.budget import compute_budget
from lit_modules.config.validate import Validated, validated
from lit_modules.config.composition import compose_run_config


class _StepTimer(L.Callback):
    """Wall time of optimizer steps after a warmup, excluding setup and validation."""

    def __init__(self, warmup: int):
        self.warmup = warmup
        self.start: float | None = None
        self.end: float | None = None
        self.timed_steps = 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warmup and self.start is None:
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.start is not None:
            self.end = time.perf_counter()
            self.timed_steps = trainer.global_step - self.warmup


def bench_checked(overrides: list[str], steps: int) -> Validated:
    cfg = compose_run_config(["regime=steps", f"trainer.max_steps={steps}", "trainer.val_every_n_steps=100000",
                              "runs_dir=/tmp/bench_runs", *overrides])
    return validated(cfg)


def bench_config(overrides: list[str], steps: int):
    return bench_checked(overrides, steps).config


def lightning_seconds_per_step(overrides: list[str], steps: int, warmup: int = 10) -> float:
    """Our real training path (model transforms, technique callbacks, schedule, clipping), no MLflow I/O."""
    checked = bench_checked(overrides, steps + warmup)
    cfg, budget, techniques = checked.config, checked.budget, checked.techniques
    data = build_data(cfg)
    torch.manual_seed(cfg.seed)
    model, _ = build_model(cfg, techniques)
    module = build_module(cfg, model, techniques, budget, None)
    timer = _StepTimer(warmup)
    callbacks = [cb for t in techniques for cb in t.callbacks()] + [timer]
    trainer = L.Trainer(
        accelerator=cfg.trainer.accelerator, devices=1, precision=cfg.trainer.precision, max_steps=budget.steps,
        max_epochs=-1, limit_val_batches=0, num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, gradient_clip_val=cfg.optim.grad_clip or None,
        callbacks=callbacks,
    )
    trainer.fit(module, datamodule=data.datamodule)
    return (timer.end - timer.start) / timer.timed_steps


def plain_seconds_per_step(overrides: list[str], steps: int, warmup: int = 10) -> float:
    """The same model, optimizer, schedule, clipping and batches in a hand-written PyTorch loop."""
    cfg = bench_config(overrides, steps + warmup)
    budget = compute_budget(cfg)
    data = build_data(cfg)
    torch.manual_seed(cfg.seed)
    model, _ = build_model(cfg, [])
    module = build_module(cfg, model, [], budget, None)
    optimizer = module._optimizer_factory(model)
    scheduler = module._schedule_factory(optimizer)
    stream = iter(data.datamodule.train_stream(0, 0, 1))
    model.train()
    start = None
    for step in range(budget.steps):
        if step == warmup:
            start = time.perf_counter()
        x, y = next(stream)
        logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        if cfg.optim.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
    return (time.perf_counter() - start) / (budget.steps - warmup)


def ratio_rows(name: str, base: list[str], variants: dict[str, list[str]], steps: int, repeats: int) -> list[dict]:
    times: dict[str, list[float]] = {"baseline": []}
    for _ in range(repeats):
        times["baseline"].append(lightning_seconds_per_step(base, steps))
        for label, extra in variants.items():
            times.setdefault(label, []).append(lightning_seconds_per_step([*base, *extra], steps))
    baseline = min(times["baseline"])
    return [
        {"bench": name, "variant": label, "s_per_step": min(t), "ratio_vs_baseline": min(t) / baseline}
        for label, t in times.items()
    ]
