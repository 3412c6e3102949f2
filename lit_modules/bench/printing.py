"""The bench's table on stdout: one line per bench.json key (median, interval, clock, target), then one
sentence per descriptive row."""

from __future__ import annotations

import math
import statistics

from lit_modules.bench.settings import WISCA_PERIOD


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def print_summary(summary: dict) -> None:
    print(f"{'row':40s} {'median':>9s}  {'95% interval':19s} {'+-':>6s}  {'clock':6s} target")
    for key, d in summary["details"].items():
        interval = d.get("interval_95")
        span = f"{fmt(interval[0])} .. {fmt(interval[1])}" if interval else "(too few)"
        half = d.get("half_width")
        half = f"{half:.1%}" if half is not None and math.isfinite(half) else "-"
        if "from" in d:
            half = "(from)"
        target = ""
        if "target" in d:
            t = d["target"]
            target = f"{t['op']} {t['bound']:g} {'pass' if t['passes'] else 'FAIL'}"
            target += "" if t["decided"] else " (interval straddles)"
        line = f"{key:40s} {fmt(d['median']):>9s}  {span:19s} {half:>6s}  {d.get('clock', ''):6s} {target}"
        if d["problems"]:
            line += "  NOISY: " + "; ".join(d["problems"])
        print(line)
    for row in summary["rows"]:
        _print_row(row)  # a bench this file does not know (e.g. the sweep's) prints its own sentence
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
        print(f"wisca: measured with a transition every {row['measured_every_n_steps']} steps ({fmt(row['raw_ratio'])}x), "
              f"scaled to every {WISCA_PERIOD}: {row['scaled']}")
    elif bench == "cell_fixed_cost":
        phases = row.get("phases")
        if phases:
            packages = ", ".join(f"{k} {v:.0%}" for k, v in phases["package_shares"].items() if v >= 0.01)
            named = ", ".join(f"{k} {v:.0%}" for k, v in phases["phase_shares"].items() if v >= 0.01)
            cpu = statistics.median(row["warm_thread_s"])
            print(f"a warm cell's fixed cost: {row['median_s']:.3g} s wall, {cpu:.3g} s of it thread CPU (the first cell in "
                  f"a process: {row['first_s']:.2f} s); profiled by package: {packages}; by phase: {named}")
