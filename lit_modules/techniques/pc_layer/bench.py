"""PC-layer benchmark rows for `make bench`: training step time against the polynomial's analytic FLOPs, at
several model sizes, and the merged model's inference time against the baseline's (goal 1.00x).

Within every repeat the baseline and the PC variants run back to back (`bench.verdict.alternate`), and each
ratio is taken per repeat, so a busy neighbour weighs on both sides of it; the verdict module reports
min / median / max and calls out a noisy or implausible ratio (PC can never be faster than the baseline).
"""

from __future__ import annotations

import time
from functools import partial

import torch
from omegaconf import OmegaConf

from lit_modules.bench.steps import bench_config, lightning_seconds_per_step
from lit_modules.bench.verdict import Ratio, alternate, per_repeat_ratios
from lit_modules.build import build_model, build_techniques
from lit_modules.techniques.pc_layer.cost import pc_step_flops
from lit_modules.techniques.pc_layer.merge import merge_pc

LEVELS = (2, 4)


def excess_points(analytic_ratio: float):
    """measured ratio -> its excess over 1 + analytic extra FLOPs, in percentage points."""
    return lambda measured: (measured - analytic_ratio) * 100.0


def training_ratios(models: list[str], steps: int, repeats: int) -> tuple[list[Ratio], dict, list[dict]]:
    """Per model and level: the step-time ratio over the baseline (one per repeat), the derived excess over
    the math (`pc_excess_over_math_<model>_level<k>`, points) and a descriptive row."""
    ratios, derived, rows = [], {}, []
    for model in models:
        base = [f"model={model}"]
        variants = {"baseline": base, **{f"level{k}": [*base, f"pc_layer=level{k}"] for k in LEVELS}}
        times = alternate({name: partial(lightning_seconds_per_step, o, steps) for name, o in variants.items()}, repeats)
        cfg = bench_config(base, steps)
        tokens = cfg.data.batch_size * cfg.data.seq_len
        for level in LEVELS:
            analytic = 1.0 + pc_step_flops(OmegaConf.to_object(cfg.model), level, tokens)["overhead"]
            ratio = Ratio(f"pc_{model}_level{level}_vs_baseline",
                          per_repeat_ratios(times[f"level{level}"], times["baseline"]), at_least=1.0)
            ratios.append(ratio)
            derived[f"pc_excess_over_math_{model}_level{level}"] = (ratio.key, excess_points(analytic))
            rows.append({
                "bench": "pc_train_step", "variant": f"{model}_level{level}",
                "s_per_step": sorted(times[f"level{level}"])[len(times[f"level{level}"]) // 2],
                "baseline_s_per_step": sorted(times["baseline"])[len(times["baseline"]) // 2],
                "ratio_vs_baseline": ratio.median, "analytic_ratio": analytic,
                "excess_over_math_points": excess_points(analytic)(ratio.median),
                "tokens_per_microbatch": tokens, "repeats": repeats,
            })
    return ratios, derived, rows


def _forward_seconds(model: torch.nn.Module, x: torch.Tensor, iters: int) -> float:
    with torch.no_grad():
        model(x)  # warm-up
        start = time.perf_counter()
        for _ in range(iters):
            model(x)
    return (time.perf_counter() - start) / iters


def inference_ratios(model_name: str, repeats: int, iters: int = 20, level: int = 4) -> tuple[list[Ratio], list[dict]]:
    """Forward time of the merged PC model and of the unmerged one, each over the plain baseline's."""
    cfg = bench_config([f"model={model_name}", f"pc_layer=level{level}"], 10)
    baseline, _ = build_model(bench_config([f"model={model_name}"], 10), [])
    unmerged, _ = build_model(cfg, build_techniques(cfg))
    merged, _ = build_model(cfg, build_techniques(cfg))
    merge_pc(merged)
    models = {"baseline": baseline.eval(), "unmerged": unmerged.eval(), "merged": merged.eval()}
    x = torch.randint(0, cfg.model.vocab_size, (cfg.data.batch_size, cfg.data.seq_len))
    times = alternate({name: partial(_forward_seconds, model, x, iters) for name, model in models.items()}, repeats)
    ratios = [Ratio(f"pc_{name}_inference_vs_plain", per_repeat_ratios(times[name], times["baseline"]), at_least=1.0)
              for name in ("merged", "unmerged")]
    rows = [{"bench": "pc_inference", "variant": f"{model_name}_level{level}_{r.key.split('_')[1]}",
             "ratio_vs_baseline": r.median, "batch": list(x.shape), "repeats": repeats} for r in ratios]
    return ratios, rows
