"""`make gpu-check`: what one GPU does with our code, within a time budget (9 minutes on one H100 by default)
-> results/gpu_check/<gpu>.json, with the commit and the command that measured it.

    python -m lit_modules.bench.gpu_check [--out FILE] [--only a,b] [--budget-s 540] [--smoke --device cpu]

Parts, in this order (`--only` picks some; bench/gpu_parts.py has what each measures):
- throughput: GPT-2-124M as the recipe trains it: tokens/s, MFU against the one peak table
  (callbacks/peak_flops.py; an unlisted device reports "unknown", never a guess), peak memory, and a
  profile: the top kernels, the shares of the optimizer, of data (fetching and copying batches) and of
  launch gaps (the device idle between kernels).
- resume: the real training path on the GPU: N steps uninterrupted, twice, and N/2 + resume + N/2; their
  train/loss histories compared bit for bit (two uninterrupted runs that differ: nondeterministic kernels,
  and resume cannot be judged exact; reported as such).
- techniques: PC level 4, WISCA (a transition every 250 steps) and MoLS step time over the baseline's, eager.
- pc_vs_baseline: PC level 4 against the baseline, a few hundred steps on 2 seeds at a 6-layer rung.
- cells: aggregate tokens/s of k = 1, 2, 4, 8 small cells packed on the device (what cells_per_device=k buys).
- techniques_compiled: the techniques' ratios with torch.compile (last: PC's compile is the longest).

A part that the time left cannot hold is skipped and named in the file; the file is rewritten after every
part, so a check stopped from outside keeps what it measured. Without a CUDA GPU it says so in one sentence
and exits 0, writing nothing (`--smoke --device cpu` runs every part at a few steps on the CPU instead: the
check's own test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import torch

from lit_modules.bench import gpu_parts
from lit_modules.bench.gpu_parts import GPU, PRECISION, SMOKE, mfu  # noqa: F401 - mfu: the check's arithmetic
from lit_modules.callbacks.peak_flops import PEAK_TFLOPS_BF16, peak_flops
from lit_modules.config.composition import compose_run_config
from lit_modules.model import Llama
from lit_modules.model.counting import flops_per_token

NO_GPU = "No CUDA GPU is visible to torch here, so the GPU check has nothing to measure (exit 0, nothing written)."
PARTS = ("throughput", "resume", "techniques", "pc_vs_baseline", "cells", "techniques_compiled")
BUDGET_S = 540.0  # 9 minutes: the check must fit one short GPU session
# Estimated seconds of each part on an H100 (not yet measured: the GPU run's file has the real ones); a part is
# skipped when the time left cannot hold its estimate.
EXPECTED_S = {"throughput": 60, "resume": 30, "techniques": 60, "pc_vs_baseline": 60, "cells": 70,
              "techniques_compiled": 60}
COMPILED_S = {"baseline": 40, "wisca": 20, "mols": 20, "pc_level4": 150}  # compile included
EAGER_S = {"baseline": 8, "wisca": 20, "mols": 12, "pc_level4": 15}
REPO = Path(__file__).resolve().parents[2]


def peak_of(device_name: str) -> float | None:
    """Dense bf16 peak FLOP/s of a device by name (the one table in callbacks/peak_flops.py)."""
    return peak_flops(device_name, PRECISION)


def train_step_flops(model: Llama, batch: int, seq_len: int) -> float:
    """Analytic FLOPs of one forward+backward over batch x seq_len tokens (what MFU divides by)."""
    return float(flops_per_token(model.cfg, seq_len)["total"]) * batch * seq_len


def device_slug(name: str) -> str:
    """The results file's name for a device: h100, h200, a100, ... (else the name, lowercased)."""
    upper = name.upper()
    for key in sorted(PEAK_TFLOPS_BF16, key=len, reverse=True):
        if key in upper:
            return key.lower() + ("_pcie" if "PCIE" in upper else "")
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "device"


def _history(client, run_id: str, key: str = "train/loss") -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def resume(scale: gpu_parts.Scale, steps: int = 30) -> dict:
    from mlflow.tracking import MlflowClient

    from lit_modules.train import run

    half = steps // 2
    with tempfile.TemporaryDirectory(prefix="gpu-check-resume-") as tmp:
        base = [*scale.device, "model=small", "regime=steps", f"trainer.max_steps={steps}",
                "trainer.val_every_n_steps=100000", "trainer.log_every_n_steps=1", f"runs_dir={tmp}"]
        whole = run(compose_run_config(base))
        again = run(compose_run_config(base))
        first = run(compose_run_config([*base, f"trainer.stop_after_steps={half}"]))
        resumed = run(compose_run_config([*base, f"resume={first.run_id}"]))
        client = MlflowClient(f"sqlite:///{Path(tmp).resolve() / 'mlflow.db'}")
        a, b, c = (_history(client, r.run_id) for r in (whole, again, resumed))
    deterministic = a == b
    return {
        "steps": steps, "resumed_at": half, "uninterrupted_runs_identical": deterministic,
        "resumed_identical_to_uninterrupted": a == c,
        "verdict": ("exact" if a == c else "NOT exact") if deterministic
        else "undecidable: two uninterrupted runs already differ (nondeterministic kernels)",
        "max_abs_difference": max((abs(x[1] - y[1]) for x, y in zip(a, c)), default=0.0),
    }


def _commit() -> str:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()
        except OSError:  # no git on the machine: --commit names it
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def _part(name: str, scale: gpu_parts.Scale, device_name: str, deadline: float):
    """The part's measuring function (called with no arguments)."""
    if name == "throughput":
        return lambda: gpu_parts.throughput(scale, device_name)
    if name == "resume":
        return lambda: resume(scale)
    if name in ("techniques", "techniques_compiled"):
        compiled = name == "techniques_compiled"
        if compiled and not scale.compiled:
            return lambda: {"skipped": "no compile on the CPU smoke run"}
        return lambda: gpu_parts.techniques(scale, compiled, deadline, COMPILED_S if compiled else EAGER_S)
    if name == "pc_vs_baseline":
        return lambda: gpu_parts.pc_vs_baseline(scale)
    from lit_modules.bench.gpu_cells import packed_rows

    warmup, steps = scale.cell_steps
    return lambda: packed_rows([*scale.device, *scale.cells], scale.cell_counts, warmup, steps, deadline)


def _print(name: str, result: dict) -> None:
    shown = {k: v for k, v in result.items() if k not in ("profile", "overrides", "runs")}
    print(f"{name}: {json.dumps(shown, default=str)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="default: results/gpu_check/<gpu>.json")
    parser.add_argument("--only", default=",".join(PARTS))
    parser.add_argument("--budget-s", type=float, default=BUDGET_S)
    parser.add_argument("--smoke", action="store_true", help="every part at a few steps (the check's own test)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--commit", default=None, help="the commit measured, where this copy has no git history")
    args = parser.parse_args(argv)
    parts = args.only.split(",")
    unknown = [p for p in parts if p not in PARTS]
    if unknown or args.budget_s <= 0 or (args.device == "cpu" and not args.smoke):
        parser.error(f"--only takes {', '.join(PARTS)}, --budget-s a positive number, and --device cpu comes "
                     "with --smoke")
    if args.device == "cuda" and not torch.cuda.is_available():
        print(NO_GPU)
        return 0
    started = time.perf_counter()
    deadline = started + args.budget_s
    os.environ.pop("MLFLOW_TRACKING_URI", None)  # the runs of the check use their own temporary stores
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
    out = Path(args.out or REPO / "results" / "gpu_check" / f"{device_slug(name)}.json")
    peak = peak_of(name)
    command = "python -m lit_modules.bench.gpu_check " + " ".join(sys.argv[1:] if argv is None else argv)
    report: dict = {"what": "make gpu-check on one device", "commit": args.commit or _commit(),
                    "date": date.today().isoformat(), "command": command.strip(), "budget_s": args.budget_s,
                    "gpu_check": {"device": name, "peak_tflops_bf16_dense": peak / 1e12 if peak else "unknown",
                                  "torch": torch.__version__, "cuda": torch.version.cuda}}
    checked = report["gpu_check"]
    scale = SMOKE if args.smoke else GPU
    for part in [p for p in PARTS if p in parts]:
        if time.perf_counter() + (0 if args.smoke else EXPECTED_S[part]) > deadline:
            checked[part] = {"skipped": f"the {args.budget_s:.0f} s budget is spent"}
        else:
            part_start = time.perf_counter()
            try:
                checked[part] = _part(part, scale, name, deadline)()
            except Exception as err:  # noqa: BLE001 - one part's failure is recorded; the others still measure
                checked[part] = {"error": f"{type(err).__name__}: {err}"}
            checked[part]["seconds"] = time.perf_counter() - part_start
        _print(part, checked[part])
        report["seconds"] = time.perf_counter() - started
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1, default=str) + "\n")  # after every part: a stop keeps the rest
    print(f"written: {out} ({report['seconds']:.0f} s of a {args.budget_s:.0f} s budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
