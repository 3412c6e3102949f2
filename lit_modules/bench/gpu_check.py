"""`make gpu-check`: what one GPU does with our code, in at most ~8 minutes -> bench_results/gpu.json.

    python -m lit_modules.bench.gpu_check [--out bench_results/gpu.json] [--steps 30] [--only a,b]

Parts (`--only` picks some: throughput, resume, techniques):
- throughput: the GPT-2-124M-shape body (conf/model/gpt2_124m) with a 32k head (the shape its comment
  counts), bf16 autocast and torch.compile, fed by the platform's own data module (byte tokens are valid
  ids of any larger vocabulary): tokens/s, MFU against the one peak table (callbacks/throughput.py; an
  unlisted device reports "unknown", never a guess), the share of each step spent fetching and copying the
  batch, and peak memory.
- resume: the real training path on the GPU (`trainer=gpu`): N steps uninterrupted, twice, and N/2 +
  resume + N/2; their train/loss histories compared bit for bit. Two uninterrupted runs that differ mean
  the kernels are not deterministic, and then resume cannot be judged exact (reported as such).
- techniques: PC (level 4) and WISCA (a transition inside the timed window) step time over the baseline.

Without a CUDA GPU it says so in one sentence and exits 0, writing nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from lit_modules.callbacks.throughput import peak_flops
from lit_modules.config.composition import compose_run_config
from lit_modules.model import Llama
from lit_modules.model.counting import flops_per_token

NO_GPU = "No CUDA GPU is visible to torch here, so the GPU check has nothing to measure (exit 0, nothing written)."
PARTS = ("throughput", "resume", "techniques")
HEAD_VOCAB = 32768  # the 32k vocabulary conf/model/gpt2_124m.yaml counts its 134M parameters at
PRECISION = "bf16-mixed"


def mfu(tokens_per_s: float, flops_per_token_: float, peak: float | None) -> float | None:
    """Model FLOPs utilization: achieved model FLOP/s over the device's dense peak (None when unknown)."""
    return tokens_per_s * flops_per_token_ / peak if peak else None


def peak_of(device_name: str) -> float | None:
    """Dense bf16 peak FLOP/s of a device by name (the one table in callbacks/throughput.py)."""
    return peak_flops(device_name, PRECISION)


def train_step_flops(model: Llama, batch: int, seq_len: int) -> float:
    """Analytic FLOPs of one forward+backward over batch x seq_len tokens (what MFU divides by)."""
    return float(flops_per_token(model.cfg, seq_len)["total"]) * batch * seq_len


def _gpt2_config(seq_len: int, batch: int):
    return compose_run_config(["model=gpt2_124m", "trainer=gpu", "regime=steps", "trainer.max_steps=1",
                               f"data.seq_len={seq_len}", f"data.batch_size={batch}"])


def throughput(steps: int, seq_len: int = 1024, batch: int = 16, warmup: int = 5) -> dict:
    from lit_modules.build import build_data
    from lit_modules.config.validate import validated

    device = torch.device("cuda")
    cfg = validated(_gpt2_config(seq_len, batch)).config
    stream = iter(build_data(cfg).datamodule.train_stream(0, 0, 1))
    model_cfg = dataclasses.replace(OmegaConf.to_object(cfg.model), vocab_size=HEAD_VOCAB)
    torch.manual_seed(0)
    model = Llama(model_cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    step_fn = torch.compile(model)
    torch.cuda.reset_peak_memory_stats(device)

    def one_step() -> float:
        fetch_start = time.perf_counter()
        x, y = next(stream)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        fetched = time.perf_counter() - fetch_start
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = step_fn(x)
        F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return fetched

    compile_start = time.perf_counter()
    for _ in range(warmup):
        one_step()
    torch.cuda.synchronize(device)
    compile_s = time.perf_counter() - compile_start
    start = time.perf_counter()
    fetch = sum(one_step() for _ in range(steps))
    torch.cuda.synchronize(device)
    wall = time.perf_counter() - start
    name = torch.cuda.get_device_name(device)
    peak = peak_of(name)
    tokens_per_s = steps * batch * seq_len / wall
    per_token = train_step_flops(model, batch, seq_len) / (batch * seq_len)
    achieved = mfu(tokens_per_s, per_token, peak)
    return {
        "model": "gpt2_124m body + 32k head", "parameters": sum(p.numel() for p in model.parameters()),
        "batch": batch, "seq_len": seq_len, "precision": PRECISION, "compiled": True,
        "warmup_and_compile_s": compile_s, "s_per_step": wall / steps, "tokens_per_s": tokens_per_s,
        "flops_per_token": per_token, "peak_tflops": peak / 1e12 if peak else "unknown",
        "mfu": achieved if achieved is not None else "unknown",
        # CPU time fetching and copying the batch; the GPU may still be busy with the previous step meanwhile,
        # so this is an upper bound on what data loading can stall.
        "data_loading_share_of_step": fetch / wall,
        "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30,
    }


def _history(client, run_id: str, key: str = "train/loss") -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def resume(steps: int) -> dict:
    from mlflow.tracking import MlflowClient

    from lit_modules.train import run

    half = steps // 2
    with tempfile.TemporaryDirectory(prefix="gpu-check-resume-") as tmp:
        base = ["trainer=gpu", "model=small", "regime=steps", f"trainer.max_steps={steps}",
                "trainer.val_every_n_steps=100000", "trainer.log_every_n_steps=1", f"runs_dir={tmp}"]
        whole = run(compose_run_config(base))
        again = run(compose_run_config(base))
        first = run(compose_run_config([*base, f"trainer.stop_after_steps={half}"]))
        resumed = run(compose_run_config([*base, f"resume={first.run_id}"]))
        client = MlflowClient(f"sqlite:///{Path(tmp).resolve() / 'mlflow.db'}")
        a, b, c = (_history(client, r.run_id) for r in (whole, again, resumed))
    deterministic = a == b
    return {
        "steps": steps, "resumed_at": half, "precision": PRECISION,
        "uninterrupted_runs_identical": deterministic,
        "resumed_identical_to_uninterrupted": a == c,
        "verdict": ("exact" if a == c else "NOT exact") if deterministic
        else "undecidable: two uninterrupted runs already differ (nondeterministic kernels)",
        "max_abs_difference": max((abs(x[1] - y[1]) for x, y in zip(a, c)), default=0.0),
    }


def techniques(steps: int) -> dict:
    from lit_modules.bench.steps import lightning_seconds_per_step
    from lit_modules.bench.verdict import alternate

    base = ["trainer=gpu", "model=gpt2_124m", "data.seq_len=512"]
    variants = {"baseline": base, "pc_level4": [*base, "pc_layer=level4"],
                "wisca": [*base, "wisca=qk_vo_tensor", f"techniques.wisca.every_n_steps={max(2, steps // 2)}"]}
    times = alternate({k: partial(lightning_seconds_per_step, v, steps) for k, v in variants.items()}, 1)
    baseline = times["baseline"][0]
    return {"model": "gpt2_124m body, byte vocabulary", "steps": steps, "baseline_s_per_step": baseline,
            **{f"{k}_vs_baseline": t[0] / baseline for k, t in times.items() if k != "baseline"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="bench_results/gpu.json")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--only", default=",".join(PARTS))
    args = parser.parse_args(argv)
    parts = args.only.split(",")
    unknown = [p for p in parts if p not in PARTS]
    if unknown or args.steps < 2:
        parser.error(f"--only takes {', '.join(PARTS)} and --steps at least 2")
    if not torch.cuda.is_available():
        print(NO_GPU)
        return 0
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the resume runs use their own temporary store
    name = torch.cuda.get_device_name(0)
    peak = peak_of(name)
    report: dict = {"device": name, "peak_tflops_bf16_dense": peak / 1e12 if peak else "unknown",
                    "torch": torch.__version__, "cuda": torch.version.cuda}
    started = time.perf_counter()
    for part in parts:
        part_start = time.perf_counter()
        report[part] = {"throughput": partial(throughput, args.steps), "resume": partial(resume, args.steps),
                        "techniques": partial(techniques, args.steps)}[part]()
        report[part]["seconds"] = time.perf_counter() - part_start
        print(f"{part}: {json.dumps(report[part], default=str)}", flush=True)
    report["seconds"] = time.perf_counter() - started
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2, default=str))
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
