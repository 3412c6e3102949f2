"""`make bench`: speed ratios measured in one process, on the same model, data and threads.

Timed tests are banned (shared, noisy machines); ratios measured back to back are what we report. Within
every repeat both sides of a ratio run one after the other (the order flips every repeat), each ratio is
taken per repeat, and bench_results/bench.json holds each key's median, `noisy` (keys whose repeats
disagree by > 10 % or that are physically implausible; see verdict.py) and the details.

    python -m lit_modules.bench [--steps 60] [--model tiny] [--repeats 3] [--strict]
                                [--only lightning,pc,wisca,mols,eval,cells,sweep[,compile]]
                                [--pc-models tiny,small] [--sweep-repeats 2] [--out bench_results/bench.json]

`--strict`: exit 1 when any ratio is noisy (a quiet machine should give none).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import torch

from lit_modules.bench.steps import (
    bench_config,
    callback_shares,
    lightning_seconds_per_step,
    plain_seconds_per_step,
)
from lit_modules.bench.verdict import Ratio, alternate, bench_summary, per_repeat_ratios
from lit_modules.build import build_data, build_model
from lit_modules.config import files
from lit_modules.quiet import quiet_libraries

DEFAULT_ONLY = "lightning,pc,wisca,mols,eval,cells,sweep"
KNOWN = set(DEFAULT_ONLY.split(",")) | {"compile"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pc-models", default="tiny,small", help="model sizes of the PC step-time rows")
    parser.add_argument("--sweep-repeats", type=int, default=2, help="each repeat runs two 6-trial sweeps")
    parser.add_argument("--sweep-trials", type=int, default=6)
    parser.add_argument("--out", default="bench_results/bench.json")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any ratio is noisy or implausible")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only.split(",")) - KNOWN)
    if unknown:
        parser.error(f"--only: unknown bench {', '.join(unknown)} (known: {', '.join(sorted(KNOWN))})")
    if args.repeats < 1 or args.steps < 1 or args.sweep_repeats < 1:
        parser.error("--repeats, --steps and --sweep-repeats must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_libraries()  # Lightning's banners and known warnings, once per measured fit, bury the figures
    torch.set_num_threads(max(1, torch.get_num_threads()))
    base = [f"model={args.model}"]
    wanted = set(args.only.split(","))
    ratios: list[Ratio] = []
    derived: dict = {}
    rows: list[dict] = []
    load_before = os.getloadavg()
    if "lightning" in wanted:
        times = alternate({"plain": partial(plain_seconds_per_step, base, args.steps),
                           "lightning": partial(lightning_seconds_per_step, base, args.steps)}, args.repeats)
        ratio = Ratio("lightning_speed_vs_plain", per_repeat_ratios(times["plain"], times["lightning"]), at_most=1.0)
        ratios.append(ratio)
        rows.append({"bench": "lightning_vs_plain", "variant": args.model, "plain_s_per_step": times["plain"],
                     "lightning_s_per_step": times["lightning"], "speed_vs_plain": ratio.median,
                     "callback_shares_of_step": callback_shares(base, args.steps)})
    if "pc" in wanted:
        from lit_modules.techniques.pc_layer.bench import inference_ratios, training_ratios

        pc_ratios, pc_derived, pc_rows = training_ratios(args.pc_models.split(","), args.steps, args.repeats)
        inf_ratios, inf_rows = inference_ratios(args.model, args.repeats)
        ratios += pc_ratios + inf_ratios
        derived.update(pc_derived)
        rows += pc_rows + inf_rows
    for name, (key, extra) in _technique_benches().items():
        if name in wanted:
            # WISCA's cost is one transition per 250 steps: time enough steps to include two.
            steps = max(args.steps, 510) if name == "wisca" else args.steps
            times = alternate({"baseline": partial(lightning_seconds_per_step, base, steps),
                               "variant": partial(lightning_seconds_per_step, [*base, *extra], steps)}, args.repeats)
            ratios.append(Ratio(key, per_repeat_ratios(times["variant"], times["baseline"]), at_least=1.0))
    if "eval" in wanted:
        ratio, row = _eval_bench(args.model, args.repeats)
        ratios.append(ratio)
        rows.append(row)
    if "cells" in wanted:
        from lit_modules.bench.cells import cell_fixed_cost

        cost = cell_fixed_cost(base, args.repeats)
        ratios.append(Ratio("cell_fixed_cost_s", tuple(cost["warm_s"])))
        rows.append({"bench": "cell_fixed_cost", "variant": args.model, **cost})
    if "sweep" in wanted:
        from lit_modules.bench.cells import sweep_seconds

        cores = os.cpu_count() or 1
        trial_s: dict[str, list[float]] = {"one": [], "two": []}
        times = alternate({name: partial(sweep_seconds, workers, args.sweep_trials, trial_seconds=trial_s[name])
                           for name, workers in (("one", 1), ("two", 2))}, args.sweep_repeats)
        ratio = Ratio("sweep_2_workers_vs_1", per_repeat_ratios(times["one"], times["two"]), at_most=min(2.0, float(cores)))
        # The most two workers can give: twice the trials at once, each on half the threads. One trial on
        # 2 threads runs `thread_speedup` times faster than on 1, so the makespan can shrink by 2 / that.
        thread_speedup = per_repeat_ratios(trial_s["two"], trial_s["one"])
        ideal = tuple(2.0 / s for s in thread_speedup)
        ratios += [ratio, Ratio("sweep_2_workers_ideal", ideal, at_most=2.0),
                   Ratio("sweep_2_workers_efficiency", per_repeat_ratios(list(ratio.per_repeat), list(ideal)), at_most=1.05)]
        rows.append({"bench": "sweep", "variant": f"lr_wd {args.sweep_trials} trials", "one_worker_s": times["one"],
                     "two_workers_s": times["two"], "median_trial_s_one_worker": trial_s["one"],
                     "median_trial_s_two_workers": trial_s["two"], "thread_speedup_of_one_trial": thread_speedup,
                     "cores": cores})
    if "compile" in wanted:
        from lit_modules.bench.compile import compile_rows

        compile_ratios, compile_rows_ = compile_rows(args.pc_models.split(","), args.steps, args.repeats)
        ratios += compile_ratios
        rows += compile_rows_
    summary = bench_summary(ratios, derived)
    summary["rows"] = rows
    summary["machine"] = {"load_average_before": load_before, "load_average_after": os.getloadavg(),
                          "torch_threads": torch.get_num_threads(), "cores": os.cpu_count(),
                          "evidence_running": Path("/work/EVIDENCE_RUNNING").exists(), "commit": _commit(),
                          "command": " ".join(["python -m lit_modules.bench", *(argv if argv is not None else sys.argv[1:])])}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2))
    _print(summary)
    print(f"written: {args.out}")
    return 1 if args.strict and summary["noisy"] else 0


def _print(summary: dict) -> None:
    for key, detail in summary["details"].items():
        line = f"{key:40s} median={summary[key]:.4g}  min={detail['min']:.4g}  max={detail['max']:.4g}"
        if detail["problems"]:
            line += "  NOISY: " + "; ".join(detail["problems"])
        print(line)
    for row in summary["rows"]:
        if "callback_shares_of_step" in row:
            shares = ", ".join(f"{k} {v:.1%}" for k, v in row["callback_shares_of_step"].items())
            print(f"per-step share of the Lightning step ({row['variant']}): {shares}")
    load = summary["machine"]["load_average_before"]
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; noisy: {', '.join(summary['noisy']) or 'none'}")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _technique_benches() -> dict[str, tuple[str, list[str]]]:
    """bench name -> (bench.json key, overrides): each technique's overhead over the baseline step, only
    for techniques that exist in conf/."""
    benches = {
        "wisca": ("wisca_every_250_vs_baseline", ["wisca=qk_vo_tensor", "techniques.wisca.every_n_steps=250"]),
        "mols": ("mols_vs_baseline", ["mols=snr"]),
    }
    return {name: b for name, b in benches.items() if files.has_option(*b[1][0].split("=", 1))}


def _eval_bench(model_name: str, repeats: int) -> tuple[Ratio, dict]:
    from lit_modules.evaluation.bench import bench_adapter

    cfg = bench_config([f"model={model_name}"], 1)
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    result = bench_adapter(model.eval(), data.tokenizer, 200, repeats=repeats)
    # A batched path that scores differently from one request at a time is a wrong answer, not a speed-up.
    notes = () if result["identical"] else ("batched scores differ from one-at-a-time scores",)
    ratio = Ratio("eval_batched_vs_single", tuple(result["ratios"]), notes=notes)
    return ratio, {"bench": "eval_adapter", "variant": model_name, **result}


if __name__ == "__main__":
    sys.exit(main())
