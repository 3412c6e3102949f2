"""PC-layer benchmark rows for `make bench`: training step time against the polynomial's analytic FLOPs, at
several model sizes, and the merged model's inference time against the baseline's (goal 1.00x).

Every time is the best of `repeats` alternated measurements in this process (a busy neighbour only ever
slows a repeat down), so the ratios compare like with like.
"""

from __future__ import annotations

import time

import torch
from omegaconf import OmegaConf

from lit_modules.bench.steps import bench_config, lightning_seconds_per_step
from lit_modules.build import build_model, build_techniques
from lit_modules.techniques.pc_layer.cost import pc_step_flops
from lit_modules.techniques.pc_layer.merge import merge_pc

LEVELS = (2, 4)


def training_rows(models: list[str], steps: int, repeats: int) -> list[dict]:
    """Per model and level: measured step-time ratio over baseline next to 1 + analytic extra FLOPs."""
    rows = []
    for model in models:
        base = [f"model={model}"]
        variants = {"baseline": base, **{f"level{k}": [*base, f"pc_layer=level{k}"] for k in LEVELS}}
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(repeats):
            for name, overrides in variants.items():
                times[name].append(lightning_seconds_per_step(overrides, steps))
        cfg = bench_config(base, steps)
        tokens = cfg.data.batch_size * cfg.data.seq_len
        baseline = min(times["baseline"])
        for level in LEVELS:
            analytic = pc_step_flops(OmegaConf.to_object(cfg.model), level, tokens)["overhead"]
            measured = min(times[f"level{level}"]) / baseline
            rows.append({
                "bench": "pc_train_step", "variant": f"{model}_level{level}", "s_per_step": min(times[f"level{level}"]),
                "baseline_s_per_step": baseline, "ratio_vs_baseline": measured,
                "analytic_ratio": 1.0 + analytic, "excess_over_math": measured / (1.0 + analytic),
                "tokens_per_microbatch": tokens, "repeats": repeats,
            })
    return rows


def _forward_seconds(model: torch.nn.Module, x: torch.Tensor, iters: int) -> float:
    with torch.no_grad():
        model(x)  # warm-up
        start = time.perf_counter()
        for _ in range(iters):
            model(x)
    return (time.perf_counter() - start) / iters


def inference_rows(model_name: str, repeats: int, iters: int = 20, level: int = 4) -> list[dict]:
    """Forward time of the merged PC model and of the unmerged one, each over the plain baseline's."""
    cfg = bench_config([f"model={model_name}", f"pc_layer=level{level}"], 10)
    baseline, _ = build_model(bench_config([f"model={model_name}"], 10), [])
    unmerged, _ = build_model(cfg, build_techniques(cfg))
    merged, _ = build_model(cfg, build_techniques(cfg))
    merge_pc(merged)
    models = {"baseline": baseline.eval(), "unmerged": unmerged.eval(), "merged": merged.eval()}
    x = torch.randint(0, cfg.model.vocab_size, (cfg.data.batch_size, cfg.data.seq_len))
    times: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(repeats):
        for name, model in models.items():
            times[name].append(_forward_seconds(model, x, iters))
    best = {name: min(t) for name, t in times.items()}
    return [
        {"bench": "pc_inference", "variant": f"{model_name}_level{level}_{name}", "s_per_forward": best[name],
         "baseline_s_per_forward": best["baseline"], "ratio_vs_baseline": best[name] / best["baseline"],
         "batch": list(x.shape), "repeats": repeats}
        for name in ("merged", "unmerged")
    ]
