"""What the PC layer adds to one training step, counted (not timed), so any machine measures the same figures:
`pc_launches_per_step_gpt2_124m_level4` (operations; `..._6_layers` at half the depth) and, in its rows, the
step's peak memory (bytes) with PC and without.

Both come from the torch profiler over real Lightning fits (our training path, `bench.steps`) of the gpt2_124m body
(conf/model/gpt2_124m.yaml) with a tiny batch on the CPU, PC level 4 against the baseline; steps 1..STEPS are
each one sample (step 0 creates the optimizer's state), marked by a `record_function` from the start of the step's
first batch to the start of the next step's, so the callbacks' per-step work (PC's power-iteration refresh) is in.

Operations: the aten operations recorded in a step, PC's minus the baseline's. One counts when it can launch
work on a device:

- not a view (`OpOverload.is_view`: detach, select, transpose, unsqueeze, ... make no kernel anywhere), and
- not inside another counted operation (`bmm` once, not again for the kernels it calls; an `aten::to` that
  copies counts through the `_to_copy` it calls), and
- not the optimizer's update (what its `step` runs after the backward): on the CPU torch's AdamW updates one
  tensor at a time (10 operations per tensor, so PC's one learnable gamma per matrix adds 10 per matrix),
  where on CUDA its foreach/fused update takes PC's gammas in the same launches as every other parameter.
  That count is reported beside the figure (`optimizer_ops_added`), as are the views (`all_ops_added`).

Memory: the profiler records every CPU allocation and free with its size; the running sum from the start of the
fit (model, optimizer state, activations, everything torch allocated) peaks somewhere in each step
(`peak_bytes`, `baseline_peak_bytes`, `peak_ratio`). A count repeats exactly from step to step, so its interval
is a point.
"""

from __future__ import annotations

import collections
from functools import lru_cache

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from lit_modules.bench.steps import bench_config, lightning_workload
from lit_modules.bench.verdict import Ratio, Target

MODEL = "gpt2_124m"
LEVEL = 4
STEPS = 6  # profiled steps per fit: one sample each
DEPTHS = (6, 12)  # layers at which the rows state the counts (12 is the model's own depth)
TINY_BATCH = ["data.batch_size=1", "data.seq_len=16"]
TARGET = Target("<=", 300)
OPTIMIZER_SCOPE = "Optimizer.step#"  # torch.optim's record_function around every optimizer's step
BACKWARD_OP = "autograd::engine::evaluate_function"  # the autograd engine's record around each backward node
MARK = "bench.pc_launches.step"


@lru_cache(maxsize=None)
def is_view(name: str) -> bool:
    """Whether aten op `name` ("aten::select") only makes a view of its input (no kernel on any device)."""
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    if packet is None:
        return False
    return any(getattr(packet, overload).is_view for overload in packet.overloads())


def _placement(event) -> tuple[int | None, bool, bool, object | None]:
    """(step of its mark or None, inside a counted aten op, inside any aten op, the optimizer's step around it)."""
    step, nested, under_aten, optimizer = None, False, False, None
    parent = event.cpu_parent
    while parent is not None:
        if parent.name.startswith("aten::"):
            under_aten = True
            nested = nested or not is_view(parent.name)
        elif parent.name.startswith(OPTIMIZER_SCOPE):
            optimizer = parent
        elif parent.name.startswith(MARK):
            step = int(parent.name.removeprefix(MARK))
        parent = parent.cpu_parent
    return step, nested, under_aten, optimizer


def launch_counts(events, steps: int | None = None) -> list[dict[str, collections.Counter]]:
    """Per step (marked 1..steps; everything as one step when `steps` is None): counted ops by name in
    `launch` (the figure), `optimizer` (the same rule, for the optimizer's update) and `all` (every top-level
    aten op outside the update, views included).

    The update is what the optimizer's `step` runs after the last backward inside it: Lightning's automatic
    loop runs its closure (forward, backward, clipping) inside `step`, a manual loop calls `step` on its own."""
    events = list(events)
    after_backward: dict[int, float] = {}  # optimizer step event -> end of the last backward op inside it
    for event in events:
        if event.name.startswith(BACKWARD_OP):
            optimizer = _placement(event)[3]
            if optimizer is not None:
                after_backward[id(optimizer)] = max(after_backward.get(id(optimizer), 0.0), event.time_range.end)
    out = [{k: collections.Counter() for k in ("launch", "optimizer", "all")} for _ in range(steps or 1)]
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        step, nested, under_aten, optimizer = _placement(event)
        if steps is not None and step is None:
            continue
        counts = out[step - 1 if steps is not None else 0]
        in_update = optimizer is not None and event.time_range.start >= after_backward.get(id(optimizer), 0.0)
        if not nested and not is_view(event.name):
            counts["optimizer" if in_update else "launch"][event.name] += 1
        if not under_aten and not in_update:
            counts["all"][event.name] += 1
    return out


def peak_bytes(prof: profile, steps: int) -> list[int]:
    """Per marked step, the most bytes torch held on the CPU at once since the profiler started."""
    events = prof.profiler.kineto_results.events()
    marks = {int(e.name().removeprefix(MARK)): (e.start_ns(), e.end_ns())
             for e in events if e.name().startswith(MARK)}
    memory = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    peaks, live, index = [], 0, 0
    for step in range(1, steps + 1):
        start, end = marks[step]
        while index < len(memory) and memory[index][0] < start:
            live += memory[index][1]
            index += 1
        peak = live
        while index < len(memory) and memory[index][0] <= end:
            live += memory[index][1]
            peak = max(peak, live)
            index += 1
        peaks.append(peak)
    return peaks


class _StepMarks:
    """A step hook (`bench.steps.lightning_workload`): marks optimizer steps 1..steps, each from the start of its
    first batch to the start of the next step's."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self._mark: record_function | None = None

    def __call__(self, step: int) -> None:
        if self._mark is not None:
            self._mark.__exit__(None, None, None)
            self._mark = None
        if 1 <= step <= self.steps:
            self._mark = record_function(f"{MARK}{step}")
            self._mark.__enter__()


def step_profiles(overrides: list[str], steps: int = STEPS) -> tuple[list[dict], list[int]]:
    """(counted ops, peak bytes) of each of `steps` training steps of the composed config."""
    marks = _StepMarks(steps)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        lightning_workload(overrides)(marks, steps + 2)
    return launch_counts(prof.events(), steps), peak_bytes(prof, steps)


def added(model: str, layers: int, level: int, extra: list[str], steps: int = STEPS) -> dict:
    """PC's added ops per step at `layers` layers, its peak memory over the baseline's, and their parts."""
    base = [f"model={model}", f"model.n_layers={layers}", *TINY_BATCH, *extra]
    plain, plain_peak = step_profiles(base, steps)
    pc, pc_peak = step_profiles([*base, f"pc_layer=level{level}"], steps)

    def diff(kind: str) -> list[int]:
        return [sum(p[kind].values()) - sum(b[kind].values()) for p, b in zip(pc, plain)]

    by_name = pc[-1]["launch"].copy()
    by_name.subtract(plain[-1]["launch"])
    return {"samples": diff("launch"), "all_ops_added": diff("all"), "optimizer_ops_added": diff("optimizer"),
            "baseline_ops": sum(plain[-1]["launch"].values()), "pc_ops": sum(pc[-1]["launch"].values()),
            "added_by_op": dict(sorted(((k, v) for k, v in by_name.items() if v), key=lambda kv: -kv[1])),
            "peak_bytes": pc_peak, "baseline_peak_bytes": plain_peak,
            "peak_ratio": [p / b for p, b in zip(pc_peak, plain_peak)]}


def pc_launch_rows(extra: list[str] = (), steps: int = STEPS, model: str = MODEL, depths: tuple[int, ...] = DEPTHS,
                   level: int = LEVEL) -> tuple[list[Ratio], list[dict]]:
    """One bench.json key per depth (`pc_launches_per_step_<model>_level<k>` at the model's own depth, with the
    target; `..._<layers>_layers` at the others) and one descriptive row per depth (peak memory included)."""
    own = int(bench_config([f"model={model}"], 2).model.n_layers)
    ratios, rows = [], []
    for layers in sorted({*depths, own}):
        found = added(model, layers, level, list(extra), steps)
        key = f"pc_launches_per_step_{model}_level{level}" + ("" if layers == own else f"_{layers}_layers")
        target = TARGET if (model, level) == (MODEL, LEVEL) and layers == own else None
        ratios.append(Ratio(key, tuple(found["samples"]), clock="count", target=target))
        rows.append({"bench": "pc_launches", "variant": f"{model}_{layers}_layers_level{level}", "clock": "count",
                     "layers": layers, "tokens_per_step": _tokens(model, list(extra)),
                     "added_per_step": found["samples"][-1], **found})
    return ratios, rows


def _tokens(model: str, extra: list[str]) -> int:
    cfg = bench_config([f"model={model}", *TINY_BATCH, *extra], 2)
    return int(cfg.data.batch_size * cfg.data.seq_len * cfg.trainer.accumulate_grad_batches)


__all__ = ["DEPTHS", "STEPS", "TARGET", "added", "is_view", "launch_counts", "pc_launch_rows", "peak_bytes",
           "step_profiles"]
