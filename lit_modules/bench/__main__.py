"""`make bench`: speed ratios measured in one process, on the same model, data and threads.

Timed tests are banned (shared, noisy machines); ratios measured side by side are what we report.
Single-threaded rows (one torch thread) time the **CPU time of the thread** (`time.thread_time`: steal
time from other guests and other processes do not count), next to wall time: both sides of a ratio take
turns in short blocks, many times (A B A B ... A, `bench.turns`), each block over the mean of its
reference's blocks on either side. Rows that span processes (two sweep workers) or wait on files (a cell's
fixed cost) use **wall** time, over repeats. Each row is reported as its median and a distribution-free
95 % interval for the median (order statistics, `bench.verdict`); a row is a figure when that interval is
within +-3 %, and bench_results/bench.json's `noisy` lists the rows that are not. The issue's targets are
shown next to the figures (pass/fail); they never fail the bench.

    python -m lit_modules.bench [--quick] [--only lightning,flops,pc,wisca,mols,eval,cells,sweep[,compile]]
                                [--model tiny] [--models tiny,tiny_x4,small] [--blocks 20] [--block-steps 5]
                                [--warmup 10] [--threads 1] [--cell-repeats 10] [--sweep-repeats 6]
                                [--sweep-trials 6] [--steps 60] [--repeats 3] [--strict]
                                [--out bench_results/bench.json]

`--quick`: the smallest settings (seq 32, batch 4, 6 blocks of 2 steps, 2-trial sweeps of 3 steps): a smoke
test of every row, not a measurement. `--strict`: exit 1 when any row is noisy (a quiet machine should give
none). `--steps` / `--repeats`: the callback-share fit and the opt-in compile row (whole runs per repeat).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

from lit_modules.bench.steps import bench_config, callback_shares, lightning_workload, plain_workload
from lit_modules.bench.turns import block_ratios, interleave, loop_workload, off_thread_share, per_step
from lit_modules.bench.verdict import Ratio, Target, alternate, bench_summary, per_repeat_ratios
from lit_modules.build import build_data, build_model
from lit_modules.config import files
from lit_modules.quiet import quiet_libraries

DEFAULT_ONLY = "lightning,flops,pc,wisca,mols,eval,cells,sweep"
KNOWN = set(DEFAULT_ONLY.split(",")) | {"compile"}
WISCA_PERIOD = 250

# The targets (27, items 2, 3 and 5); shown next to each figure, never failing the bench.
TARGETS = {
    "lightning_speed_vs_plain": Target(">=", 0.98),
    "wisca_every_250_vs_baseline": Target("<=", 1.01),
    "mols_vs_baseline": Target("<=", 1.02),
    "sweep_2_workers_efficiency": Target(">=", 0.95),
    "cell_fixed_cost_s": Target("<=", 0.5),
}
SHAPE_TARGET = Target(">=", 0.90)


@dataclass
class Settings:
    blocks: int
    block_steps: int
    warmup: int
    extra: list[str] = field(default_factory=list)  # overrides of every single-process row
    cell_repeats: int = 10
    cell_steps: int = 5
    sweep_repeats: int = 6
    sweep_trials: int = 6
    sweep_extra: list[str] = field(default_factory=list)
    eval_requests: int = 200
    eval_blocks: int = 16
    gemm_blocks: int = 20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smallest settings: a smoke test, not a measurement")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--model", default="tiny", help="model of the Lightning, WISCA, MoLS, eval and cell rows")
    parser.add_argument("--models", "--pc-models", dest="models", default=None,
                        help="models of the FLOP and PC rows (default tiny,tiny_x4,small; --quick: tiny)")
    parser.add_argument("--blocks", type=int, default=None, help="blocks per side of each interleaved row (20)")
    parser.add_argument("--block-steps", type=int, default=None, help="steps per block (5)")
    parser.add_argument("--warmup", type=int, default=None, help="steps before the first block (10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the single-threaded rows")
    parser.add_argument("--cell-repeats", type=int, default=None)
    parser.add_argument("--sweep-repeats", type=int, default=None, help="each repeat runs a 1- and a 2-worker sweep")
    parser.add_argument("--sweep-trials", type=int, default=None)
    parser.add_argument("--steps", type=int, default=60, help="steps of the callback-share fit and the compile row")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the compile row")
    parser.add_argument("--out", default="bench_results/bench.json")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any row is noisy or implausible")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only.split(",")) - KNOWN)
    if unknown:
        parser.error(f"--only: unknown bench {', '.join(unknown)} (known: {', '.join(sorted(KNOWN))})")
    for name in ("blocks", "block_steps", "cell_repeats", "sweep_repeats", "sweep_trials", "threads", "steps", "repeats"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup is not None and args.warmup < 0:
        parser.error("--warmup must be at least 0")
    return args


def settings_of(args: argparse.Namespace) -> Settings:
    if args.quick:
        extra = ["data.seq_len=32", "data.batch_size=4", "schedule.warmup_fraction=0.3"]  # MoLS estimates in warmup
        s = Settings(blocks=6, block_steps=2, warmup=2, extra=extra, cell_repeats=2, cell_steps=3, sweep_repeats=1,
                     sweep_trials=2, sweep_extra=["trainer.max_steps=3", *extra], eval_requests=8, eval_blocks=6,
                     gemm_blocks=6)
        args.models = args.models or "tiny"
    else:
        s = Settings(blocks=20, block_steps=5, warmup=10)
        args.models = args.models or "tiny,tiny_x4,small"
    for name in ("blocks", "block_steps", "warmup", "cell_repeats", "sweep_repeats", "sweep_trials"):
        if getattr(args, name) is not None:
            setattr(s, name, getattr(args, name))
    s.warmup = math.ceil(s.warmup / s.block_steps) * s.block_steps  # blocks aligned on WISCA's period
    return s


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s = settings_of(args)
    quiet_libraries()  # Lightning's banners and known warnings, once per measured fit, bury the figures
    threads_before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    base = [f"model={args.model}", *s.extra]
    wanted = set(args.only.split(","))
    ratios: list[Ratio] = []
    derived: dict = {}
    rows: list[dict] = []
    load_before = os.getloadavg()
    try:
        if "lightning" in wanted:
            _lightning_rows(base, s, args.steps, ratios, rows)
        if wanted & {"flops", "pc"}:
            _model_rows(args.models.split(","), s, "flops" in wanted, "pc" in wanted, ratios, derived, rows)
        if "pc" in wanted:
            from lit_modules.bench.pc_layer_rows import inference_ratios

            inf_ratios, inf_rows = inference_ratios(args.model, s.blocks, s.block_steps, extra=s.extra)
            ratios += inf_ratios
            rows += inf_rows
        benches = _technique_benches(s.block_steps)
        for name in ("wisca", "mols"):
            if name in wanted and name in benches:
                _technique_rows(name, *benches[name], base, s, ratios, rows)
        if "eval" in wanted:
            _eval_rows(base, s, ratios, rows)
        if "cells" in wanted:
            _cell_rows(base, s, ratios, rows)
        if "sweep" in wanted:
            torch.set_num_threads(threads_before)
            _sweep_rows(s, ratios, rows)
        if "compile" in wanted:
            from lit_modules.bench.compile import compile_rows

            torch.set_num_threads(threads_before)
            compile_ratios, compile_rows_ = compile_rows(args.models.split(","), args.steps, args.repeats)
            ratios += compile_ratios
            rows += compile_rows_
    finally:
        torch.set_num_threads(threads_before)
    summary = bench_summary(ratios, derived)
    summary["rows"] = rows
    summary["method"] = {
        "interval": "distribution-free 95% interval for the median from order statistics (binomial ranks)",
        "figure_when": "interval within +-3% of the median", "thread": "time.thread_time of the timing thread "
        f"({args.threads} torch thread(s)), blocks interleaved A B A B ... A", "wall": "time.perf_counter, over repeats",
        "blocks": s.blocks, "block_steps": s.block_steps, "warmup": s.warmup, "quick": args.quick}
    summary["machine"] = {"load_average_before": load_before, "load_average_after": os.getloadavg(),
                          "torch_threads": args.threads, "cores": os.cpu_count(),
                          "evidence_running": Path("/work/EVIDENCE_RUNNING").exists(), "commit": _commit(),
                          "command": " ".join(["python -m lit_modules.bench", *(argv if argv is not None else sys.argv[1:])])}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=2))
    _print(summary)
    print(f"written: {args.out}")
    return 1 if args.strict and summary["noisy"] else 0


def _thread_ratio(key: str, reference: list, variant: list, invert: bool = False, **kwargs) -> Ratio:
    return Ratio(key, block_ratios(reference, variant, invert=invert), clock="thread", target=TARGETS.get(key),
                 wall=block_ratios(reference, variant, clock="wall", invert=invert), **kwargs)


def _median_step(blocks: list, block_steps: int) -> float:
    return statistics.median(per_step(blocks, block_steps))


def _lightning_rows(base: list[str], s: Settings, steps: int, ratios: list, rows: list) -> None:
    timed = interleave({"plain": plain_workload(base), "lightning": lightning_workload(base)},
                       s.blocks, s.block_steps, s.warmup)
    ratio = _thread_ratio("lightning_speed_vs_plain", timed["plain"], timed["lightning"], invert=True, at_most=1.0)
    ratios.append(ratio)
    rows.append({"bench": "lightning_vs_plain", "variant": base[0], "clock": "thread",
                 "plain_s_per_step": _median_step(timed["plain"], s.block_steps),
                 "lightning_s_per_step": _median_step(timed["lightning"], s.block_steps),
                 "speed_vs_plain": ratio.median, "interval_95": ratio.interval,
                 "off_thread_share": off_thread_share(timed["lightning"]),
                 "callback_shares_of_step": callback_shares(base, max(steps, s.warmup + 2), warmup=s.warmup)})


def _model_rows(models: list[str], s: Settings, flops: bool, pc: bool, ratios: list, derived: dict, rows: list) -> None:
    """Per model: the baseline step interleaved with its own matmuls (the shape rate) and the PC levels."""
    from lit_modules.bench import flops as fl

    peak = None
    if flops:
        peak_gemms = fl.peak_gemms()
        per_call = sum(g.flops for g in peak_gemms)
        timed = interleave({"peak": loop_workload(fl.gemm_runner(peak_gemms))}, s.gemm_blocks, 2, 2)
        peak = Ratio("gemm_peak_gflops", tuple(2 * per_call / b.thread / 1e9 for b in timed["peak"]), clock="thread",
                     wall=tuple(2 * per_call / b.wall / 1e9 for b in timed["peak"]))
        ratios.append(peak)
        rows.append({"bench": "gemm_peak", "variant": f"{fl.GEMM_SIZE}^3 float32 x{len(peak_gemms)}", "clock": "thread",
                     "gflops": peak.median, "interval_95": peak.interval, "off_thread_share": off_thread_share(timed["peak"])})
    for model in models:
        mbase = [f"model={model}", *s.extra]
        workloads = {"baseline": lightning_workload(mbase)}
        if flops:
            model_cfg, batch, seq_len = fl.model_shapes(bench_config(mbase, 2))
            gemms = fl.step_gemms(model_cfg, batch, seq_len)
            gemm_flops, analytic = sum(g.flops for g in gemms), fl.analytic_step_flops(model_cfg, batch, seq_len)
            workloads["gemms"] = loop_workload(fl.gemm_runner(gemms))
        if pc:
            from lit_modules.bench import pc_layer_rows as pc_bench

            workloads.update(pc_bench.workloads(mbase))
        timed = interleave(workloads, s.blocks, s.block_steps, s.warmup)
        if flops:
            scale = analytic / gemm_flops  # 1: the matmuls are the analytic count (tested)
            key = f"shape_rate_fraction_{model}"
            fraction = Ratio(key, tuple(r * scale for r in block_ratios(timed["baseline"], timed["gemms"])),
                             clock="thread", target=SHAPE_TARGET,
                             wall=tuple(r * scale for r in block_ratios(timed["baseline"], timed["gemms"], clock="wall")))
            ratios.append(fraction)
            step_s = _median_step(timed["baseline"], s.block_steps)
            gemm_s = _median_step(timed["gemms"], s.block_steps)
            rates = fl.flop_rates(analytic, step_s, gemm_flops, gemm_s, peak.median if peak else None)
            rows.append({"bench": "flops", "variant": model, "clock": "thread", "tokens_per_step": batch * seq_len,
                         "flops_per_token": analytic / (batch * seq_len), "step_s": step_s, "gemms_s": gemm_s, **rates,
                         "shape_rate_fraction": fraction.median, "interval_95": fraction.interval,
                         "off_thread_share": off_thread_share(timed["baseline"]),
                         "where_the_step_goes": fl.step_profile(mbase, steps=2 if s.block_steps < 5 else 4,
                                                                warmup=min(3, s.warmup))})
        if pc:
            pc_ratios, pc_derived, pc_rows = pc_bench.training_results(model, mbase, timed, s.block_steps)
            ratios += pc_ratios
            derived.update(pc_derived)
            rows += pc_rows


def _technique_rows(name: str, key: str, extra: list[str], base: list[str], s: Settings, ratios: list, rows: list) -> None:
    timed = interleave({"baseline": lightning_workload(base), name: lightning_workload([*base, *extra])},
                       s.blocks, s.block_steps, s.warmup)
    raw = _thread_ratio(key, timed["baseline"], timed[name], at_least=1.0)
    row = {"bench": name, "variant": " ".join(extra), "clock": "thread", "blocks": s.blocks, "block_steps": s.block_steps,
           "off_thread_share": off_thread_share(timed[name])}
    if name == "wisca":
        # One transition per block (every_n_steps = block_steps, blocks aligned on it), scaled to one per
        # 250 steps: WISCA adds no other per-step work (its callback returns at once between transitions).
        scale = s.block_steps / WISCA_PERIOD
        ratio = Ratio(key, tuple(1 + (r - 1) * scale for r in raw.samples), at_least=1.0, clock="thread",
                      target=TARGETS[key], wall=tuple(1 + (r - 1) * scale for r in raw.wall))
        row.update({"measured_every_n_steps": s.block_steps, "raw_ratio": raw.median, "raw_interval_95": raw.interval,
                    "scaled": f"1 + (raw - 1) x {s.block_steps}/{WISCA_PERIOD}"})
    else:
        ratio = raw
        row["note"] = ("the per-step cost: the one SNR estimate (its extra micro-batches at 1% of the steps) "
                       "falls in the warmup, outside the figure")
    ratios.append(ratio)
    rows.append({**row, "ratio_vs_baseline": ratio.median, "interval_95": ratio.interval})


def _technique_benches(block_steps: int) -> dict[str, tuple[str, list[str]]]:
    """bench name -> (bench.json key, overrides): each technique's overhead over the baseline step, only
    for techniques that exist in conf/."""
    benches = {
        "wisca": ("wisca_every_250_vs_baseline", ["wisca=qk_vo_tensor", f"techniques.wisca.every_n_steps={block_steps}"]),
        "mols": ("mols_vs_baseline", ["mols=snr"]),
    }
    return {name: b for name, b in benches.items() if files.has_option(*b[1][0].split("=", 1))}


def _eval_rows(base: list[str], s: Settings, ratios: list, rows: list) -> None:
    from lit_modules.evaluation.adapter import LiveLM
    from lit_modules.evaluation.bench import bench_requests

    cfg = bench_config(base, 1)
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    model.eval()
    requests = bench_requests(s.eval_requests)
    batched = LiveLM(model, data.tokenizer, batch_size=16, device="cpu")
    single = LiveLM(model, data.tokenizer, batch_size=1, device="cpu")
    # A batched path that scores differently from one request at a time is a wrong answer, not a speed-up.
    identical = batched.loglikelihood(requests) == [single.loglikelihood([r])[0] for r in requests]
    timed = interleave({"single": loop_workload(lambda: [single.loglikelihood([r]) for r in requests]),
                        "batched": loop_workload(lambda: batched.loglikelihood(requests))}, s.eval_blocks, 1, 1)
    notes = () if identical else ("batched scores differ from one-at-a-time scores",)
    ratio = _thread_ratio("eval_batched_vs_single", timed["single"], timed["batched"], invert=True, notes=notes)
    ratios.append(ratio)
    rows.append({"bench": "eval_adapter", "variant": base[0], "clock": "thread", "n_requests": s.eval_requests,
                 "batch_size": 16, "identical": identical, "speedup": ratio.median, "interval_95": ratio.interval,
                 "single_rps": s.eval_requests / _median_step(timed["single"], 1),
                 "batched_rps": s.eval_requests / _median_step(timed["batched"], 1)})


def _cell_rows(base: list[str], s: Settings, ratios: list, rows: list) -> None:
    from lit_modules.bench.cells import cell_fixed_cost

    cost = cell_fixed_cost(base, s.cell_repeats, steps=s.cell_steps, phases=True)
    ratio = Ratio("cell_fixed_cost_s", tuple(cost["warm_s"]), clock="wall", target=TARGETS["cell_fixed_cost_s"])
    ratios.append(ratio)
    rows.append({"bench": "cell_fixed_cost", "variant": base[0], "clock": "wall", "median_s": ratio.median,
                 "interval_95": ratio.interval, **cost})


def _sweep_rows(s: Settings, ratios: list, rows: list) -> None:
    from lit_modules.bench.cells import sweep_seconds, timeline_losses

    cores = os.cpu_count() or 1
    trial_s: dict[str, list[float]] = {"one": [], "two": []}
    timelines: dict[str, list[dict]] = {"one": [], "two": []}
    times = alternate({name: partial(sweep_seconds, workers, s.sweep_trials, s.sweep_extra, trial_seconds=trial_s[name],
                                     timelines=timelines[name])
                       for name, workers in (("one", 1), ("two", 2))}, s.sweep_repeats)
    speedup = per_repeat_ratios(times["one"], times["two"])
    ratio = Ratio("sweep_2_workers_vs_1", speedup, at_most=min(2.0, float(cores)), clock="wall")
    # The most two workers can give: twice the trials at once, each on half the threads. One trial on
    # 2 threads runs `thread_speedup` times faster than on 1, so the makespan can shrink by 2 / that.
    thread_speedup = per_repeat_ratios(trial_s["two"], trial_s["one"])
    ideal = tuple(2.0 / x for x in thread_speedup)
    efficiency = per_repeat_ratios(list(speedup), list(ideal))
    losses = [timeline_losses(t) for t in timelines["two"]]
    # What the efficiency would be if the second worker started with the first (its late start removed).
    without_skew = tuple(one / (two - lost["start_skew_s"]) / best
                         for one, two, lost, best in zip(times["one"], times["two"], losses, ideal))
    ratios += [ratio, Ratio("sweep_2_workers_ideal", ideal, at_most=2.0, clock="wall"),
               Ratio("sweep_2_workers_efficiency", efficiency, at_most=1.05, clock="wall",
                     target=TARGETS["sweep_2_workers_efficiency"])]
    one_losses = [timeline_losses(t) for t in timelines["one"]]
    rows.append({"bench": "sweep", "variant": f"lr_wd {s.sweep_trials} trials", "clock": "wall",
                 "one_worker_s": times["one"], "two_workers_s": times["two"],
                 "median_trial_s_one_worker": trial_s["one"], "median_trial_s_two_workers": trial_s["two"],
                 "thread_speedup_of_one_trial": thread_speedup, "cores": cores,
                 "two_workers_start_skew_s": [x["start_skew_s"] for x in losses],
                 "two_workers_median_gap_s": [x["median_gap_s"] for x in losses],
                 "two_workers_tail_s": [x["tail_s"] for x in losses],
                 "one_worker_median_gap_s": [x["median_gap_s"] for x in one_losses],
                 "efficiency_without_start_skew": without_skew,
                 "startup_s": [t["startup_s"] for t in timelines["one"] + timelines["two"]],
                 "teardown_s": [t["teardown_s"] for t in timelines["one"] + timelines["two"]]})


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _print(summary: dict) -> None:
    print(f"{'row':40s} {'median':>9s}  {'95% interval':19s} {'+-':>6s}  {'clock':6s} target")
    for key, d in summary["details"].items():
        interval = d.get("interval_95")
        span = f"{_fmt(interval[0])} .. {_fmt(interval[1])}" if interval else "(too few)"
        half = d.get("half_width")
        half = f"{half:.1%}" if half is not None and math.isfinite(half) else "-"
        if "from" in d:
            half = "(from)"
        target = ""
        if "target" in d:
            t = d["target"]
            target = f"{t['op']} {t['bound']:g} {'pass' if t['passes'] else 'FAIL'}"
            target += "" if t["decided"] else " (interval straddles)"
        line = f"{key:40s} {_fmt(d['median']):>9s}  {span:19s} {half:>6s}  {d.get('clock', ''):6s} {target}"
        if d["problems"]:
            line += "  NOISY: " + "; ".join(d["problems"])
        print(line)
    for row in summary["rows"]:
        _print_row(row)
    load = summary["machine"]["load_average_before"]
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; noisy: {', '.join(summary['noisy']) or 'none'}")


def _print_row(row: dict) -> None:
    bench = row["bench"]
    if bench == "lightning_vs_plain":
        shares = ", ".join(f"{k} {v:.1%}" for k, v in row["callback_shares_of_step"].items())
        extra_ms = (row["lightning_s_per_step"] - row["plain_s_per_step"]) * 1e3
        print(f"Lightning step {row['lightning_s_per_step'] * 1e3:.1f} ms, plain loop {row['plain_s_per_step'] * 1e3:.1f} ms "
              f"({extra_ms:+.2f} ms, thread CPU); per-step share of the Lightning step ({row['variant']}): {shares}; "
              "the rest of the difference is Lightning's loop itself")
    elif bench == "flops":
        where = row["where_the_step_goes"]
        others = ", ".join(f"{k} {v:.0%}" for k, v in where["top_other_ops"].items())
        peak = f", {row['peak_fraction']:.0%} of the SGEMM peak" if "peak_fraction" in row else ""
        print(f"{row['variant']}: {row['flops_per_token']:.3g} FLOPs/token (analytic), {row['achieved_gflops']:.1f} GFLOP/s "
              f"achieved, its matmuls alone {row['shape_rate_gflops']:.1f} GFLOP/s{peak}; profiled step: matmuls "
              f"{where['gemm_share']:.0%}, then {others}")
    elif bench == "wisca":
        print(f"wisca: measured with a transition every {row['measured_every_n_steps']} steps ({_fmt(row['raw_ratio'])}x), "
              f"scaled to every {WISCA_PERIOD}: {row['scaled']}")
    elif bench == "cell_fixed_cost":
        phases = row.get("phases")
        if phases:
            packages = ", ".join(f"{k} {v:.0%}" for k, v in phases["package_shares"].items() if v >= 0.01)
            named = ", ".join(f"{k} {v:.0%}" for k, v in phases["phase_shares"].items() if v >= 0.01)
            cpu = statistics.median(row["warm_thread_s"])
            print(f"a warm cell's fixed cost: {row['median_s']:.3g} s wall, {cpu:.3g} s of it thread CPU (the first cell in "
                  f"a process: {row['first_s']:.2f} s); profiled by package: {packages}; by phase: {named}")
    elif bench == "sweep":
        def med(values):
            return _fmt(statistics.median(values)) if values else "-"

        print(f"two sweep workers: second worker starts {med(row['two_workers_start_skew_s'])} s after the first, "
              f"gap between a worker's trials {med(row['two_workers_median_gap_s'])} s (one worker: "
              f"{med(row['one_worker_median_gap_s'])} s), tail {med(row['two_workers_tail_s'])} s; efficiency "
              f"without the late start {med(row['efficiency_without_start_skew'])}; command start to first trial "
              f"{med(row['startup_s'])} s, last trial to exit {med(row['teardown_s'])} s")


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


if __name__ == "__main__":
    sys.exit(main())
