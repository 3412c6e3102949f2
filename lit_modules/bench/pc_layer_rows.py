"""PC-layer benchmark rows for `make bench`: training step time against the polynomial's analytic FLOPs, at
several model sizes, and the merged model's inference time against the baseline's (goal 1.00x).

The baseline and the PC levels of a model take turns in short blocks in one process, behind a pacer (a copy
of the baseline) in the first place (`bench.turns`: pacer, baseline, level 2, level 4; pacer, level 4,
level 2, baseline; ...), each timed on its thread's CPU clock; each level's value per block is its block
over the baseline's block of the same round, and `bench.verdict` reports the
median with its 95 % interval (noisy when wider than +-3 %, implausible when PC measures faster than the
baseline). The inference rows repeat their interleave in fresh processes (`bench.fresh`). The issue's
target: level 4 at tiny_x4 within 5 points of its analytic FLOPs ratio; merged inference <= 1.02x.
"""

from __future__ import annotations

import statistics

import torch
from omegaconf import OmegaConf

from lit_modules.bench.fresh import in_fresh_process
from lit_modules.bench.steps import bench_config, lightning_workload
from lit_modules.bench.turns import (Clocks, first_place_effect, interleave, loop_workload, off_thread_share, per_step,
                                      round_ratios)
from lit_modules.bench.verdict import Ratio, Target
from lit_modules.build import build_model, build_techniques
from lit_modules.steady_heap import steady_heap
from lit_modules.techniques.pc_layer.cost import pc_step_flops
from lit_modules.techniques.pc_layer.merge import merge_pc

LEVELS = (2, 4)
EXCESS_TARGETS = {("tiny_x4", 4): Target("<=", 5.0)}  # points over the math
MERGED_TARGET = Target("<=", 1.02)


def excess_points(analytic_ratio: float):
    """measured ratio -> its excess over 1 + analytic extra FLOPs, in percentage points."""
    return lambda measured: (measured - analytic_ratio) * 100.0


def analytic_ratio(overrides: list[str], level: int) -> float:
    """1 + PC's extra FLOPs per step over the baseline's matmul FLOPs, for the composed config."""
    cfg = bench_config(overrides, 2)
    tokens = cfg.data.batch_size * cfg.data.seq_len
    return 1.0 + pc_step_flops(OmegaConf.to_object(cfg.model), level, tokens,
                               accumulate_grad_batches=cfg.trainer.accumulate_grad_batches)["overhead"]


def workloads(base: list[str]) -> dict:
    """The PC levels' fits, to interleave after the baseline's (`bench.turns`)."""
    return {f"level{k}": lightning_workload([*base, f"pc_layer=level{k}"]) for k in LEVELS}


def training_results(model: str, base: list[str], blocks: dict, block_steps: int) -> tuple[list[Ratio], dict, list[dict]]:
    """From blocks interleaved behind a pacer (`blocks["baseline"]`, `blocks["level<k>"]`): per level the step-time ratio
    over the baseline, the derived excess over the math (`pc_excess_over_math_<model>_level<k>`, points)
    and a descriptive row."""
    ratios, derived, rows = [], {}, []
    baseline_step = per_step(blocks["baseline"], block_steps)
    for level in LEVELS:
        name = f"level{level}"
        analytic = analytic_ratio(base, level)
        ratio = Ratio(f"pc_{model}_level{level}_vs_baseline", round_ratios(blocks["baseline"], blocks[name]),
                      at_least=1.0, clock="thread",
                      wall=round_ratios(blocks["baseline"], blocks[name], clock="wall"))
        ratios.append(ratio)
        key = f"pc_excess_over_math_{model}_level{level}"
        target = EXCESS_TARGETS.get((model, level))
        derived[key] = (ratio.key, excess_points(analytic), target) if target else (ratio.key, excess_points(analytic))
        level_step = per_step(blocks[name], block_steps)
        rows.append({
            "bench": "pc_train_step", "variant": f"{model}_level{level}", "clock": "thread",
            "s_per_step": sorted(level_step)[len(level_step) // 2],
            "baseline_s_per_step": sorted(baseline_step)[len(baseline_step) // 2],
            "ratio_vs_baseline": ratio.median, "interval_95": ratio.interval, "analytic_ratio": analytic,
            "excess_over_math_points": excess_points(analytic)(ratio.median),
            "blocks": len(blocks[name]), "block_steps": block_steps, "off_thread_share": off_thread_share(blocks[name]),
        })
    return ratios, derived, rows


def training_ratios(models: list[str], blocks: int, block_steps: int, warmup: int,
                    extra: list[str] = ()) -> tuple[list[Ratio], dict, list[dict]]:
    """Each model's baseline and PC levels interleaved on their own (`make bench` interleaves them with the
    model's matmul yardstick as well, see bench/__main__.py)."""
    ratios, derived, rows = [], {}, []
    for model in models:
        base = [f"model={model}", *extra]
        timed = interleave({"baseline": lightning_workload(base), **workloads(base)}, blocks, block_steps, warmup,
                           pacer=lightning_workload(base))
        r, d, w = training_results(model, base, timed, block_steps)
        ratios, rows = ratios + r, rows + w
        derived.update(d)
    return ratios, derived, rows


def _forward(model: torch.nn.Module, x: torch.Tensor):
    def step() -> None:
        with torch.no_grad():
            model(x)

    return step


def inference_blocks(model_name: str, blocks: int, block_steps: int, warmup: int, level: int, extra: list[str],
                     threads: int) -> tuple[dict[str, list[Clocks]], list[int]]:
    """One interleave of the forwards on models built here (one repeat, run in a fresh process): the blocks
    by workload, and the batch's shape."""
    torch.set_num_threads(threads)
    steady_heap()  # without it the same model read 1.00 or 1.17 from one process to the next (steady_heap.py)
    base = [f"model={model_name}", *extra]
    cfg = bench_config([*base, f"pc_layer=level{level}"], 10)
    baseline, _ = build_model(bench_config(base, 10), [])
    unmerged, _ = build_model(cfg, build_techniques(cfg))
    merged, _ = build_model(cfg, build_techniques(cfg))
    merge_pc(merged)
    models = {"baseline": baseline.eval(), "plain_again": baseline, "merged": merged.eval(), "unmerged": unmerged.eval()}
    x = torch.randint(0, cfg.model.vocab_size, (cfg.data.batch_size, cfg.data.seq_len))
    timed = interleave({name: loop_workload(_forward(m, x)) for name, m in models.items()}, blocks, block_steps, warmup,
                       pacer=loop_workload(_forward(baseline, x)))
    return timed, list(x.shape)


def inference_ratios(model_name: str, blocks: int, block_steps: int = 5, warmup: int = 2, level: int = 4,
                     extra: list[str] = (), repeats: int = 3) -> tuple[list[Ratio], list[dict]]:
    """Forward time of the merged PC model and of the unmerged one, each over the plain baseline's, in
    interleaved blocks of `block_steps` forwards behind a pacer (the plain model in the first place); and of
    the plain model itself in another place (`pc_plain_again_inference_vs_plain`, an A/A control: the same
    model object, so any distance from 1 is the measurement's; with the reference first it read 1.03-1.05).
    Each of `repeats` interleaves runs in a fresh process on models built there (`bench.fresh`): the blocks
    pool, and the interval spans every repeat's median (one process's A/A read 1.025 where four others read
    1.002-1.010)."""
    runs = [in_fresh_process(inference_blocks, model_name, blocks, block_steps, warmup, level, list(extra),
                             torch.get_num_threads()) for _ in range(repeats)]

    def pooled(name: str, clock: str = "thread") -> tuple[float, ...]:
        return tuple(v for timed, _ in runs for v in round_ratios(timed["baseline"], timed[name], clock=clock))

    def medians(name: str) -> tuple[float, ...]:
        return tuple(statistics.median(round_ratios(timed["baseline"], timed[name])) for timed, _ in runs)

    ratios = [Ratio(f"pc_{name}_inference_vs_plain", pooled(name),
                    at_least=None if name == "plain_again" else 1.0,
                    clock="thread",
                    target=MERGED_TARGET if name == "merged" else None,
                    wall=pooled(name, "wall"), repeats=medians(name) if repeats > 1 else ())
              for name in ("merged", "unmerged", "plain_again")]
    first_place = statistics.median(first_place_effect(timed, "baseline") for timed, _ in runs)
    rows = [{"bench": "pc_inference", "variant": f"{model_name}_level{level}_{r.key.removeprefix('pc_').split('_inference')[0]}",
             "clock": "thread",
             "ratio_vs_baseline": r.median, "interval_95": r.interval, "repeat_medians": list(r.repeats),
             "batch": runs[0][1], "blocks": blocks, "repeats": repeats, "fresh_process_per_repeat": True,
             "forwards_per_block": block_steps, "reference_vs_first_place": first_place} for r in ratios]
    return ratios, rows
