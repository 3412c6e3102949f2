"""`make bench`: speed ratios measured in one process, on the same model, data and threads.

Timed tests are banned (shared, noisy machines); ratios measured back to back are what we report.
    python -m lit_modules.bench [--steps 60] [--model tiny] [--only lightning,wisca,pc,mols,eval]
                                [--pc-models tiny,small]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F

from lit_modules.build import build_data, build_model, build_module, build_techniques
from lit_modules.config.budget import compute_budget
from lit_modules.config.validate import validate
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


def _config(overrides: list[str], steps: int):
    cfg = compose_run_config(["regime=steps", f"trainer.max_steps={steps}", "trainer.val_every_n_steps=100000",
                              "runs_dir=/tmp/bench_runs", *overrides])
    return validate(cfg)


def lightning_seconds_per_step(overrides: list[str], steps: int, warmup: int = 10) -> float:
    """Our real training path (model transforms, technique callbacks, schedule, clipping), no MLflow I/O."""
    cfg = _config(overrides, steps + warmup)
    budget = compute_budget(cfg)
    techniques = build_techniques(cfg)
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
    cfg = _config(overrides, steps + warmup)
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


def _ratio_rows(name: str, base: list[str], variants: dict[str, list[str]], steps: int, repeats: int) -> list[dict]:
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
        from lit_modules.bench_pc import inference_rows, training_rows

        rows += training_rows(args.pc_models.split(","), args.steps, args.repeats)
        rows += inference_rows(args.model, args.repeats)
    for name, variants in _technique_benches().items():
        if name in wanted:
            # WISCA's cost is one transition per 250 steps: time enough steps to include two.
            steps = max(args.steps, 510) if name == "wisca" else args.steps
            rows += _ratio_rows(name, base, variants, steps, args.repeats)
    if "eval" in wanted:
        rows.append(_eval_bench(args.model))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2))
    for row in rows:
        print("  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    print(f"written: {args.out}")


def _technique_benches() -> dict[str, dict[str, list[str]]]:
    """Overheads of each technique over the baseline step, only for techniques that exist in conf/."""
    conf = Path(__file__).resolve().parent.parent / "conf"
    benches = {
        "wisca": {"wisca_every_250": ["wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=250"]},
        "mols": {"mols": ["mols=snr"]},
    }
    available = {}
    for name, variants in benches.items():
        group = {"wisca": "wisca", "mols": "mols"}[name]
        keep = {k: v for k, v in variants.items() if (conf / group / f"{v[0].split('=')[1]}.yaml").exists()}
        if keep:
            available[name] = keep
    return available


def _eval_bench(model_name: str) -> dict:
    try:
        from lit_modules.evaluation.bench import bench_adapter
    except ImportError:
        return {"bench": "eval_adapter", "variant": "unavailable"}
    cfg = _config([f"model={model_name}"], 1)
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    result = bench_adapter(model.eval(), data.tokenizer, 200)
    return {"bench": "eval_adapter", "variant": model_name, **result,
            "batched_speed_vs_single": result["batched_rps"] / result["single_rps"]}


if __name__ == "__main__":
    main()
