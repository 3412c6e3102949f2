"""The measuring parts of `make gpu-check` (bench/gpu_check.py runs them within its time budget).

- throughput: GPT-2-124M as the recipe trains it (50,304-row head, bf16, compiled, fused AdamW, read-ahead
  loader; 16 x 1024 tokens a step): tokens/s, MFU, peak memory, and a profile of four steps (top kernels;
  optimizer, data and launch-gap shares).
- techniques (eager) and techniques_compiled: the step time of PC level 4, WISCA (a transition every 250 steps,
  one inside the 250-step window) and MoLS over the baseline's, at the gpt2_124m body.
- pc_vs_baseline: a few hundred steps of the baseline and of PC level 4 (AdamW) on two seeds at a GPU rung of 6
  layers (llama_20m), through the real training path: final losses, the paired difference, seconds per step.
- cells: packed cells (bench/gpu_cells.py), aggregate tokens/s for k = 1, 2, 4, 8 cells on the device.

`Scale` holds every size; `SMOKE` runs the same code in seconds on the CPU (the check's own test).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from lit_modules.bench.gpu_fit import format_profile, gpu_fit
from lit_modules.callbacks.peak_flops import peak_flops


@dataclass(frozen=True)
class Scale:
    device: list[str]  # the trainer overrides of the device
    throughput: list[str]
    throughput_steps: tuple[int, int, int]  # warmup, timed, profiled
    techniques: list[str]
    technique_steps: tuple[int, int]  # warmup, timed
    wisca_every: int  # WISCA's transitions: the timed window holds exactly one
    compiled: bool  # measure the techniques compiled too
    rung: list[str]
    rung_steps: int
    seeds: tuple[int, ...]
    cells: list[str]
    cell_counts: tuple[int, ...]
    cell_steps: tuple[int, int]  # warmup, timed


GPU = Scale(
    device=["trainer=gpu"],
    throughput=["model=gpt2_124m", "model.vocab_size=50304", "trainer.compile=true", "data.seq_len=1024",
                "data.batch_size=16"],
    throughput_steps=(10, 20, 4),
    techniques=["model=gpt2_124m", "data.seq_len=512", "data.batch_size=16"],
    technique_steps=(5, 30), wisca_every=250, compiled=True,
    rung=["model=llama_20m", "data.seq_len=256", "data.batch_size=16", "optim.lr=1e-3"], rung_steps=300, seeds=(0, 1),
    cells=["model=small", "data.seq_len=256", "data.batch_size=16"], cell_counts=(1, 2, 4, 8), cell_steps=(20, 100),
)
SMOKE = Scale(
    device=["trainer=cpu", "trainer.num_threads=1"],
    throughput=["data.seq_len=64", "data.batch_size=8"], throughput_steps=(2, 4, 2),
    techniques=["data.seq_len=64", "data.batch_size=8"], technique_steps=(2, 4), wisca_every=5, compiled=False,
    rung=["data.seq_len=64", "data.batch_size=8"], rung_steps=12, seeds=(0, 1),
    cells=["data.seq_len=64", "data.batch_size=8"], cell_counts=(1, 2), cell_steps=(2, 4),
)
PRECISION = "bf16-mixed"


def mfu(tokens_per_s: float, flops_per_token_: float, peak: float | None) -> float | None:
    """Model FLOPs utilization: achieved model FLOP/s over the device's dense peak (None when unknown)."""
    return tokens_per_s * flops_per_token_ / peak if peak else None


def throughput(scale: Scale, device_name: str) -> dict:
    warmup, steps, profiled = scale.throughput_steps
    overrides = [*scale.device, *scale.throughput]
    timing = gpu_fit(overrides, steps, warmup, profile_steps=profiled)
    tokens_per_s = timing.tokens_per_step / timing.seconds_per_step
    peak = peak_flops(device_name, PRECISION)
    achieved = mfu(tokens_per_s, timing.flops_per_token, peak)
    print(format_profile(timing.profile), flush=True)
    return {"overrides": overrides, "tokens_per_step": timing.tokens_per_step, "s_per_step": timing.seconds_per_step,
            "tokens_per_s": tokens_per_s, "flops_per_token": timing.flops_per_token,
            "mfu": achieved if achieved is not None else "unknown", "warmup_and_compile_s": timing.warmup_s,
            "peak_memory_gib": timing.peak_memory_gib, "profile": timing.profile}


def _variants(scale: Scale) -> dict[str, tuple[list[str], int]]:
    """name -> (its overrides, its timed steps). MoLS estimates its rates once, at step 1 (its cost is reported
    apart, `mols_estimate_s`), inside an LR warmup as long as the untimed steps, as it requires."""
    warmup, steps = scale.technique_steps
    every = scale.wisca_every
    return {"baseline": ([], steps), "pc_level4": (["pc_layer=level4"], steps),
            "wisca": (["wisca=qk_vo_tensor", f"techniques.wisca.every_n_steps={every}"], every),
            "mols": (["mols=snr", "techniques.mols.estimate_step=1", f"schedule.warmup_steps={warmup}"], steps)}


def techniques(scale: Scale, compiled: bool, deadline: float, reserve_s: dict[str, float]) -> dict:
    """Step time of each technique over the baseline's, eager or compiled; a variant the time left cannot
    hold (reserve_s: its expected seconds) is skipped and named."""
    warmup, _ = scale.technique_steps
    extra = ["trainer.compile=true"] if compiled else []
    times: dict[str, float] = {}
    result: dict = {"overrides": [*scale.device, *scale.techniques, *extra], "compiled": compiled, "skipped": {}}
    for name, (overrides, steps) in _variants(scale).items():
        if time.perf_counter() + reserve_s.get(name, 0.0) > deadline:
            result["skipped"][name] = "the check's time budget is spent"
            continue
        try:  # WISCA's window [warmup, warmup + every) holds its transition at step `every` (0 < warmup < every)
            timing = gpu_fit([*result["overrides"], *overrides], steps, warmup)
        except Exception as err:  # noqa: BLE001 - one variant's failure (e.g. its compile) is named; the rest measure
            result.setdefault("errors", {})[name] = f"{type(err).__name__}: {err}"[:500]
            continue
        times[name] = timing.seconds_per_step
        if name == "mols":
            result["mols_estimate_s"] = next(iter(timing.logged("mols/estimate_seconds")), None)
    result["s_per_step"] = times
    if "baseline" in times:
        result.update({f"{name}_vs_baseline": t / times["baseline"] for name, t in times.items() if name != "baseline"})
    return result


def pc_vs_baseline(scale: Scale) -> dict:
    """The baseline and PC level 4 (AdamW), `rung_steps` steps on each seed, the real training path."""
    from mlflow.tracking import MlflowClient

    from lit_modules.config.composition import compose_run_config
    from lit_modules.runs import metric_names
    from lit_modules.train import run

    arms = {"baseline": [], "pc_level4": ["pc_layer=level4"]}
    runs: dict[str, dict[int, dict]] = {arm: {} for arm in arms}
    with tempfile.TemporaryDirectory(prefix="gpu-check-pc-") as tmp:
        client = MlflowClient(f"sqlite:///{Path(tmp).resolve() / 'mlflow.db'}")
        for seed in scale.seeds:
            for arm, overrides in arms.items():
                steps = scale.rung_steps
                cfg = compose_run_config([*scale.device, *scale.rung, *overrides, "regime=steps", f"seed={seed}",
                                          f"trainer.max_steps={steps}", f"trainer.val_every_n_steps={steps}",
                                          f"runs_dir={tmp}"])
                started = time.perf_counter()
                result = run(cfg)
                history = [m.value for m in client.get_metric_history(result.run_id, metric_names.STEP_TIME_S)]
                runs[arm][seed] = {"val_loss": result.metrics.get("val/loss"), "train_loss": result.metrics.get("train/loss"),
                                   "s_per_step": statistics.median(history) if history else None,
                                   "wall_s": time.perf_counter() - started}
    differences = [runs["pc_level4"][s]["val_loss"] - runs["baseline"][s]["val_loss"] for s in scale.seeds]
    steps_ratio = [runs["pc_level4"][s]["s_per_step"] / runs["baseline"][s]["s_per_step"] for s in scale.seeds
                   if runs["pc_level4"][s]["s_per_step"] and runs["baseline"][s]["s_per_step"]]
    return {"overrides": [*scale.device, *scale.rung], "steps": scale.rung_steps, "seeds": list(scale.seeds),
            "runs": runs, "val_loss_pc_minus_baseline": differences,
            "mean_val_loss_pc_minus_baseline": statistics.fmean(differences),
            "pc_level4_vs_baseline_step_time": statistics.fmean(steps_ratio) if steps_ratio else None}
