"""A real fit of a composed config on one device, timed with the device synchronized, and one profiled window.

The platform's own training path (build.py: model, module with the fused optimizer on CUDA, compile when the
config asks, the per-step callbacks, the data module with its read-ahead loader), into an in-memory logger.
Steps: `warmup` (compiling, allocator warm-up), then `steps` timed (the device is synchronized when the window
opens and when it closes, so queued work is counted where it runs), then `profile_steps` under the torch
profiler, after the timed window so its overhead is not timed. `summarize` reads the profile: the top kernels
by device time, and the shares of the window's wall time spent in the optimizer step, in fetching and copying
batches, and with the device idle between kernels (launch gaps).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import lightning as L
import torch

from lit_modules.bench.steps import _lightning_fit, bench_checked

OPTIMIZER_PREFIX = "Optimizer.step#"  # torch.optim's record_function around every step
DATA_PREFIX = "enumerate(DataLoader)#"  # torch.utils.data's record_function around every next()
COPY_NAMES = ("Memcpy HtoD", "aten::_to_copy", "aten::copy_")  # host-to-device copies of the batch
TOP = 10


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class FitTiming:
    seconds_per_step: float
    warmup_s: float  # wall time of the warmup steps (compile included)
    tokens_per_step: int
    flops_per_token: float
    peak_memory_gib: float | None
    rows: list = field(default_factory=list)  # what the run logged: (step, metrics)
    profile: dict | None = None
    window: tuple[float, float] = (0.0, 0.0)  # perf_counter at the timed window's start and end

    def logged(self, key: str) -> list[float]:
        return [metrics[key] for _, metrics in self.rows if key in metrics]


class _Window(L.Callback):
    """Times steps [warmup, warmup + steps) with the device synchronized at both ends; profiles the next
    `profile_steps`; `hook(step)` runs at the start of every step (a barrier between packed cells)."""

    def __init__(self, warmup: int, steps: int, profile_steps: int, hook: Callable[[int], None] | None):
        self.warmup, self.steps, self.profile_steps, self.hook = warmup, steps, profile_steps, hook
        self.fit_start = self.start = self.end = 0.0
        self.profiler: torch.profiler.profile | None = None
        self.profile_wall = 0.0
        self.rows: list = []  # what the run logged (the bench's in-memory logger)
        self._seen = -1

    def on_train_start(self, trainer, pl_module) -> None:
        self.fit_start = time.perf_counter()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == self._seen:
            return
        self._seen = step
        device = pl_module.device
        if self.hook is not None:
            self.hook(step)
        if step == self.warmup:
            _sync(device)
            self.start = time.perf_counter()
        if step == self.warmup + self.steps:
            _sync(device)
            self.end = time.perf_counter()
            if self.profile_steps:
                activities = [torch.profiler.ProfilerActivity.CPU]
                if device.type == "cuda":
                    activities.append(torch.profiler.ProfilerActivity.CUDA)
                self.profiler = torch.profiler.profile(activities=activities)
                self.profiler.start()
                self.profile_wall = time.perf_counter()

    def on_train_end(self, trainer, pl_module) -> None:
        _sync(pl_module.device)
        self.rows = list(getattr(trainer.logger, "rows", []))
        if not self.end:  # no profiled steps: the window closes with the fit
            self.end = time.perf_counter()
        if self.profiler is not None:
            self.profiler.stop()
            self.profile_wall = time.perf_counter() - self.profile_wall


def gpu_fit(overrides: list[str], steps: int, warmup: int, profile_steps: int = 0,
            hook: Callable[[int], None] | None = None) -> FitTiming:
    """Fit `warmup + steps + profile_steps` optimizer steps of the composed config on one device: the bench's
    Lightning path (bench/steps.py), with this module's window and profiler among its callbacks."""
    total = warmup + steps + profile_steps
    checked = bench_checked(overrides, total)
    cfg, budget = checked.config, checked.budget
    window = _Window(warmup, steps, profile_steps, hook)
    cuda = cfg.trainer.accelerator in ("gpu", "cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    _lightning_fit(overrides, total, 0, wrap=lambda module, callbacks: callbacks.append(window))
    profile = None
    if window.profiler is not None:
        profile = summarize(window.profiler, window.profile_wall, profile_steps, torch.device("cuda" if cuda else "cpu"))
    return FitTiming(
        seconds_per_step=(window.end - window.start) / steps, warmup_s=window.start - window.fit_start,
        tokens_per_step=budget.tokens_per_step, flops_per_token=float(budget.flops_per_token),
        peak_memory_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else None,
        rows=window.rows, profile=profile, window=(window.start, window.end))


def summarize(prof: torch.profiler.profile, wall_s: float, steps: int, device: torch.device) -> dict:
    """Top kernels and where the profiled steps' wall time went (milliseconds per step, shares of the wall).

    On a GPU: a kernel is a device event; busy = the kernels' device time; launch gaps = the share of the wall
    with the device idle. On the CPU (the check's own tests) the "kernels" are the aten operators' own times."""
    rows = prof.key_averages()
    on_device = device.type == "cuda"

    def own(row) -> float:  # microseconds of the row's own work where it runs
        return float(row.self_device_time_total if on_device else row.self_cpu_time_total)

    def kernel(row) -> bool:
        if on_device:
            return row.self_device_time_total > 0 and row.device_type == torch.autograd.DeviceType.CUDA
        return row.key.startswith("aten::") and row.self_cpu_time_total > 0

    kernels = sorted((r for r in rows if kernel(r)), key=own, reverse=True)
    busy_us = sum(own(r) for r in kernels)
    wall_us = wall_s * 1e6

    def total(prefixes: tuple[str, ...], device_time: bool) -> float:
        matched = [r for r in rows if r.key.startswith(prefixes)]
        return sum(float(r.device_time_total if device_time else r.cpu_time_total) for r in matched)

    optimizer_us = total((OPTIMIZER_PREFIX,), on_device)
    fetch_us = total((DATA_PREFIX,), False)  # the loop waiting for its next batch, on the host
    copy_us = sum(own(r) for r in kernels if r.key.startswith(COPY_NAMES)) if on_device else 0.0
    return {
        "steps": steps, "wall_ms_per_step": wall_us / 1e3 / steps, "busy_ms_per_step": busy_us / 1e3 / steps,
        "kernels_per_step": sum(r.count for r in kernels) / steps,
        "top_kernels": [{"name": r.key[:120], "calls_per_step": r.count / steps, "ms_per_step": own(r) / 1e3 / steps,
                         "share_of_busy": own(r) / busy_us if busy_us else 0.0} for r in kernels[:TOP]],
        "optimizer_share": min(1.0, optimizer_us / wall_us),
        "data_share": min(1.0, (fetch_us + copy_us) / wall_us),
        "launch_gap_share": max(0.0, 1.0 - busy_us / wall_us) if on_device and kernels else None,
        "device": device.type,
        **({"note": "the profiler recorded no CUDA kernels (CUPTI unavailable?): no device time"}
           if on_device and not kernels else {}),
    }


def format_profile(profile: dict) -> str:
    """The profile as the terminal shows it: the shares, then the top kernels."""
    gap = profile["launch_gap_share"]
    lines = [f"  per step: {profile['wall_ms_per_step']:.2f} ms wall, {profile['busy_ms_per_step']:.2f} ms busy on "
             f"the {profile['device']}, {profile['kernels_per_step']:.0f} kernels; optimizer "
             f"{profile['optimizer_share']:.1%}, data {profile['data_share']:.1%}, launch gaps "
             + (f"{gap:.1%}" if gap is not None else "n/a") + (f" ({profile['note']})" if "note" in profile else "")]
    for k in profile["top_kernels"]:
        lines.append(f"  {k['ms_per_step']:8.3f} ms {k['share_of_busy']:6.1%} x{k['calls_per_step']:<6.1f} {k['name']}")
    return "\n".join(lines)
