"""`python -m sweeps.bench`: the sweep rows of `make bench`, merged into the bench.json that
`python -m lit_modules.bench` wrote (same flags; `make bench` runs both, this one second).

Why a second process and not a row of lit_modules.bench: the rows start `python -m sweeps.optuna_sweep`,
and nothing in lit_modules may depend on sweeps (tests/test_layers.py sees imports, not command lines), so
the sweep rows live in the layer that owns the sweep and reuse the bench's flags, verdicts and record.

Rows: `sweep_2_workers_vs_1` (wall makespan of a 1-worker over a 2-worker sweep of the same trials),
`sweep_2_workers_ideal` (the most two workers can give, from one trial's thread speed-up) and
`sweep_2_workers_efficiency` (their ratio; target >= 0.95), plus a row of where the
two-worker sweep loses time (the second worker's start skew, gaps, tail).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from functools import partial
from pathlib import Path

from lit_modules.bench.printing import fmt, print_summary
from lit_modules.bench.record import machine_of, merged, summary_of, write
from lit_modules.bench.settings import TARGETS, Settings, parse_args, settings_of
from lit_modules.bench.verdict import Ratio, alternate, per_repeat_ratios
from sweeps import bench_timeline
from sweeps.bench_timeline import timeline_losses


def sweep_rows(s: Settings, ratios: list, rows: list) -> None:
    """One- and two-worker sweeps in turns: the speed-up, the most two workers can give, the efficiency."""
    cores = os.cpu_count() or 1
    trial_s: dict[str, list[float]] = {"one": [], "two": []}
    timelines: dict[str, list[dict]] = {"one": [], "two": []}
    times = alternate({name: partial(bench_timeline.sweep_seconds, workers, s.sweep_trials, s.sweep_extra,
                                     trial_seconds=trial_s[name], timelines=timelines[name])
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


def print_row(row: dict) -> None:
    """The sweep row's sentence: where two workers lose time against one."""
    def med(values):
        return fmt(statistics.median(values)) if values else "-"

    print(f"two sweep workers: second worker starts {med(row['two_workers_start_skew_s'])} s after the first, "
          f"gap between a worker's trials {med(row['two_workers_median_gap_s'])} s (one worker: "
          f"{med(row['one_worker_median_gap_s'])} s), tail {med(row['two_workers_tail_s'])} s; efficiency "
          f"without the late start {med(row['efficiency_without_start_skew'])}; command start to first trial "
          f"{med(row['startup_s'])} s, last trial to exit {med(row['teardown_s'])} s")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "sweep" not in args.only.split(","):
        return 0  # `make bench ARGS="--only ..."` without the sweep: nothing to add
    s = settings_of(args)
    load_before = os.getloadavg()
    ratios: list[Ratio] = []
    rows: list[dict] = []
    sweep_rows(s, ratios, rows)
    command = " ".join(["python -m sweeps.bench", *(argv if argv is not None else sys.argv[1:])])
    method = {"wall": "time.perf_counter, over repeats", "quick": args.quick}
    added = summary_of(ratios, {}, rows, method, machine_of(load_before, args.threads, command))
    out = Path(args.out)
    existing = json.loads(out.read_text()) if out.is_file() else {}
    summary = merged(existing, added, {"sweep"})
    write(out, summary)
    print_summary(added)
    for row in rows:
        print_row(row)
    print(f"merged into: {out}")
    return 1 if args.strict and summary["noisy"] else 0


if __name__ == "__main__":
    sys.exit(main())
