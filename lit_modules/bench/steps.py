"""Seconds per optimizer step of a composed config: our Lightning path, and the same work in a plain loop.

The timing primitives of `make bench` (lit_modules/bench/__main__.py) and of the technique rows that
technique folders add (e.g. bench/pc_layer_rows.py).

"The same work": the Lightning path runs the per-step callbacks of a real run (divergence guard, token
progress, throughput; `build.run_step_callbacks`) and the module's own logging (loss, grad norm) into an
in-memory logger; the plain loop does each of those things by hand on the same cadence into the same kind
of logger. What is left between the two is Lightning's loop itself. `callback_shares` times each
callback's per-step hooks (and the module's logging) inside a real fit, as a share of the step.
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers.logger import Logger

from lit_modules.build import build_data, build_model, build_module, optimizer_step_flags, run_step_callbacks
from lit_modules.config.budget import compute_budget
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import Validated, validated
from lit_modules.data.datamodule import EPOCHS_METRIC
from lit_modules.hook_profiler import NoProfiler
from lit_modules.runs import metric_names

# The hooks Lightning calls on every training step: what a callback costs per step.
PER_STEP_HOOKS = (
    "on_train_batch_start", "on_before_backward", "on_after_backward", "on_before_optimizer_step",
    "on_before_zero_grad", "on_train_batch_end",
)


class MemoryLogger(Logger):
    """Keeps what a run would send to MLflow in a list: the logging work without the store's I/O."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[int | None, dict[str, float]]] = []

    @property
    def name(self) -> str:
        return "memory"

    @property
    def version(self) -> str:
        return "0"

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self.rows.append((step, {k: float(v) for k, v in metrics.items()}))

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass


class _StepTimer(L.Callback):
    """Wall time of optimizer steps after a warmup, excluding setup and validation."""

    def __init__(self, warmup: int):
        self.warmup = warmup
        self.train_start: float | None = None
        self.start: float | None = None
        self.end: float | None = None
        self.timed_steps = 0

    def on_train_start(self, trainer, pl_module):
        self.train_start = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warmup and self.start is None:
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.start is not None:
            self.end = time.perf_counter()
            self.timed_steps = trainer.global_step - self.warmup

    def seconds_per_step(self) -> float:
        if self.start is None or self.end is None or self.timed_steps < 1:
            raise RuntimeError("the timed window saw no optimizer step: give more steps than the warmup")
        return (self.end - self.start) / self.timed_steps

    def warmup_excess_seconds(self) -> float:
        """How much longer the warmup steps took than as many timed steps (e.g. torch.compile's compiling)."""
        return (self.start - self.train_start) - self.warmup * self.seconds_per_step()


def bench_checked(overrides: list[str], steps: int) -> Validated:
    cfg = compose_run_config(["regime=steps", f"trainer.max_steps={steps}", "trainer.val_every_n_steps=100000",
                              "runs_dir=/tmp/bench_runs", *overrides])
    return validated(cfg)


def bench_config(overrides: list[str], steps: int):
    return bench_checked(overrides, steps).config


class _StepHook(L.Callback):
    """Calls `hook(step)` at the first batch of every optimizer step (`bench.turns` hands turns on there)."""

    def __init__(self, hook):
        self.hook, self.seen = hook, -1

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step != self.seen:
            self.seen = trainer.global_step
            self.hook(trainer.global_step)


def _lightning_fit(overrides: list[str], steps: int, warmup: int, wrap=None, hook=None) -> tuple[_StepTimer, list]:
    checked = bench_checked(overrides, steps + warmup)
    cfg, budget, techniques = checked.config, checked.budget, checked.techniques
    data = build_data(cfg)
    torch.manual_seed(cfg.seed)
    model, _ = build_model(cfg, techniques)
    module = build_module(cfg, model, techniques, budget, None)
    timer = _StepTimer(warmup)
    callbacks = [*run_step_callbacks(cfg, budget), *(cb for t in techniques for cb in t.callbacks())]
    if wrap is not None:
        wrap(module, callbacks)
    trainer = L.Trainer(
        accelerator=cfg.trainer.accelerator, devices=1, precision=cfg.trainer.precision, max_steps=budget.steps,
        max_epochs=-1, limit_val_batches=0, num_sanity_val_steps=0, logger=MemoryLogger(),
        log_every_n_steps=cfg.trainer.log_every_n_steps, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, **optimizer_step_flags(cfg), profiler=NoProfiler(),
        # A workload is timed by its hook's blocks: no step timer beside it (the plain loop has none).
        callbacks=[*callbacks, *([timer] if hook is None else [_StepHook(hook)])],
    )
    trainer.fit(module, datamodule=data.datamodule)
    return timer, callbacks


def lightning_seconds_per_step(overrides: list[str], steps: int, warmup: int = 10) -> float:
    """Our real training path (model transforms, technique and run callbacks, logging, schedule, clipping),
    into an in-memory logger."""
    timer, _ = _lightning_fit(overrides, steps, warmup)
    return timer.seconds_per_step()


def lightning_step_timing(overrides: list[str], steps: int, warmup: int = 10) -> tuple[float, float]:
    """(seconds per timed step, extra seconds the warmup steps took)."""
    timer, _ = _lightning_fit(overrides, steps, warmup)
    return timer.seconds_per_step(), timer.warmup_excess_seconds()


def lightning_workload(overrides: list[str]):
    """`bench.turns` workload: a real fit of `steps` optimizer steps (the Lightning path, as timed above)."""

    def run(hook, steps: int) -> None:
        _lightning_fit(overrides, steps, 0, hook=hook)

    return run


def plain_workload(overrides: list[str]):
    """`bench.turns` workload: the plain loop's `steps` steps."""

    def run(hook, steps: int) -> None:
        plain_seconds_per_step(overrides, steps, warmup=0, on_step=hook)

    return run


def plain_seconds_per_step(overrides: list[str], steps: int, warmup: int = 10, on_step=None) -> float:
    """The same model, optimizer, schedule, clipping, batches and per-step callback work, by hand;
    `on_step(step)` is called at the start of every step (a `bench.turns` hook)."""
    cfg = bench_config(overrides, steps + warmup)
    if cfg.techniques and any(v is not None for v in cfg.techniques.values()):
        raise ValueError("the plain loop has no technique callbacks: compare it with the baseline only")
    budget = compute_budget(cfg)
    data = build_data(cfg)
    torch.manual_seed(cfg.seed)
    model, _ = build_model(cfg, [])
    module = build_module(cfg, model, [], budget, None)
    optimizer = module._optimizer_factory(model)
    scheduler = module._schedule_factory(optimizer)
    stream = iter(data.datamodule.train_stream(0, 0, 1))
    logger = MemoryLogger()
    every, clip = cfg.trainer.log_every_n_steps, cfg.optim.grad_clip
    model.train()
    start = window_start = None
    for step in range(budget.steps):
        if on_step is not None:
            on_step(step)
        if step == warmup:
            start = window_start = time.perf_counter()
        x, y = next(stream)
        logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        metrics: dict[str, float] = {}
        if (step + 1) % every == 0:  # the module's grad norm, before clipping
            metrics["train/grad_norm"] = float(torch.nn.utils.get_total_norm(
                [p.grad for p in model.parameters() if p.grad is not None], norm_type=2.0))
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        done = step + 1
        value = float(loss.detach())  # the divergence guard
        if not math.isfinite(value):
            raise RuntimeError(f"the plain loop's loss became {value}")
        if done % every == 0:  # the module's loss, token progress and throughput, on the logging cadence
            metrics["train/loss"] = value
            metrics[metric_names.TOKENS_SEEN] = float(done * budget.tokens_per_step)
            metrics.update({metric_names.learning_rate(g.get('name', 'group')): float(g["lr"]) for g in optimizer.param_groups})
            if window_start is not None:
                now = time.perf_counter()
                metrics[metric_names.TOKENS_PER_S] = every * budget.tokens_per_step / (now - window_start)
                metrics[metric_names.STEP_TIME_S] = (now - window_start) / every
                window_start = now
        if metrics:
            logger.log_metrics(metrics, step=step)
    seconds = (time.perf_counter() - start) / (budget.steps - warmup)
    # Once, when fitting ends (the datamodule's teardown in the Lightning path): outside the timed steps.
    logger.log_metrics({EPOCHS_METRIC: data.datamodule.epochs_read(budget.steps)}, step=budget.steps - 1)
    return seconds


def _timed(function, clock: dict[str, float], key: str):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            clock[key] = clock.get(key, 0.0) + time.perf_counter() - started

    return wrapper


class _ClockReset(L.Callback):
    """Clears the hook clocks when the timed window opens, so only timed steps count."""

    def __init__(self, clock: dict[str, float], warmup: int):
        self.clock, self.warmup, self.done = clock, warmup, False

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.global_step == self.warmup and not self.done:
            self.clock.clear()
            self.done = True


def callback_shares(overrides: list[str], steps: int, warmup: int = 10) -> dict[str, float]:
    """Share of the timed steps' wall time spent in each callback's per-step hooks, in the module's
    `self.log` and in its grad-norm hook; what remains is the step's math and Lightning's loop."""
    clock: dict[str, float] = {}

    def wrap(module: L.LightningModule, callbacks: list[L.Callback]) -> None:
        for callback in callbacks:
            name = type(callback).__name__
            for hook in PER_STEP_HOOKS:
                if getattr(type(callback), hook) is not getattr(L.Callback, hook):
                    setattr(callback, hook, _timed(getattr(callback, hook), clock, name))
        module.log = _timed(module.log, clock, "module.log")
        module.on_before_optimizer_step = _timed(module.on_before_optimizer_step, clock, "module.grad_norm")
        callbacks.insert(0, _ClockReset(clock, warmup))

    timer, _ = _lightning_fit(overrides, steps, warmup, wrap=wrap)
    total = timer.end - timer.start
    return {name: seconds / total for name, seconds in sorted(clock.items())}
