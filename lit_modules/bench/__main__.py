"""`make bench`: speed ratios measured in one process, on the same model, data and threads.

Timed tests are banned (shared, noisy machines); ratios measured back to back are what we report.
    python -m lit_modules.bench [--steps 60] [--model tiny] [--only lightning,wisca,pc,mols,eval]
                                [--pc-models tiny,small]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from lit_modules.bench.steps import (
    bench_config,
    lightning_seconds_per_step,
    plain_seconds_per_step,
    ratio_rows,
)
from lit_modules.build import build_data, build_model
from lit_modules.config import files


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--only", default="lightning,wisca,pc,mols,eval")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pc-models", default="tiny,small", help="model sizes of the PC step-time rows")
    parser.add_argument("--out", default="bench_results/bench.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    base = [f"model={args.model}"]
    wanted = set(args.only.split(","))
    rows: list[dict] = []
    if "lightning" in wanted:
        # Alternate the two loops and keep each one's best: a busy neighbour only ever slows a repeat down.
        plains, lits = [], []
        for _ in range(args.repeats):
            plains.append(plain_seconds_per_step(base, args.steps))
            lits.append(lightning_seconds_per_step(base, args.steps))
        plain, lit = min(plains), min(lits)
        rows.append({"bench": "lightning_vs_plain", "variant": args.model, "plain_s_per_step": plain,
                     "lightning_s_per_step": lit, "lightning_speed_vs_plain": plain / lit,
                     "repeats": args.repeats})
    if "pc" in wanted:
        from lit_modules.techniques.pc_layer.bench import inference_rows, training_rows

        rows += training_rows(args.pc_models.split(","), args.steps, args.repeats)
        rows += inference_rows(args.model, args.repeats)
    for name, variants in _technique_benches().items():
        if name in wanted:
            # WISCA's cost is one transition per 250 steps: time enough steps to include two.
            steps = max(args.steps, 510) if name == "wisca" else args.steps
            rows += ratio_rows(name, base, variants, steps, args.repeats)
    if "eval" in wanted:
        rows.append(_eval_bench(args.model))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    for row in rows:
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    print(f"written: {args.out}")


def _technique_benches() -> dict[str, dict[str, list[str]]]:
    """Overheads of each technique over the baseline step, only for techniques that exist in conf/."""
    benches = {
        "wisca": {"wisca_every_250": ["wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=250"]},
        "mols": {"mols": ["mols=snr"]},
    }
    available = {}
    for name, variants in benches.items():
        keep = {k: v for k, v in variants.items() if files.has_option(*v[0].split("=", 1))}
        if keep:
            available[name] = keep
    return available


def _eval_bench(model_name: str) -> dict:
    try:
        from lit_modules.evaluation.bench import bench_adapter
    except ImportError:
        return {"bench": "eval_adapter", "variant": "unavailable"}
    cfg = bench_config([f"model={model_name}"], 1)
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    result = bench_adapter(model.eval(), data.tokenizer, 200)
    return {"bench": "eval_adapter", "variant": model_name, **result,
            "batched_speed_vs_single": result["batched_rps"] / result["single_rps"]}


if __name__ == "__main__":
    main()
