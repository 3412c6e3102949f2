"""`make bench`'s flags, settings and targets. `make bench`: speed ratios measured in one process, on the same
model, data and threads.

Timed tests are banned (shared, noisy machines); ratios measured side by side are what we report.
Single-threaded rows (one torch thread) time the **CPU time of the thread** (`time.thread_time`: steal
time from other guests and other processes do not count), next to wall time: both sides of a ratio take
turns in short blocks, many times, behind a pacer in the first place (P A B, P B A, ..., `bench.turns`: the
first place reads a few percent fast), each block over its reference's block of the same round. Rows that span processes (two sweep workers) or wait on files (a cell's
fixed cost) use **wall** time, over repeats. The forward-only rows (PC inference) repeat their interleave in
3 fresh processes, in blocks of 20 forwards, and their interval spans each repeat's median (`bench.fresh`). Each row is reported as its median and a distribution-free
95 % interval for the median (order statistics, `bench.verdict`); a row is a figure when that interval is
within +-3 %, and bench_results/bench.json's `noisy` lists the rows that are not. The issue's targets are
shown next to the figures (pass/fail); they never fail the bench.

    python -m lit_modules.bench [--quick] [--only lightning,flops,pc,pc_launches,wisca,mols,eval,cells,first,sweep[,compile]]
                                [--model tiny] [--models tiny,tiny_x4,small] [--blocks 32] [--block-steps 5]
                                [--warmup 10] [--threads 1] [--cell-repeats 10] [--sweep-repeats 10]
                                [--sweep-trials 6] [--steps 60] [--repeats 3] [--strict]
                                [--out bench_results/bench.json]

`pc_launches` counts (the operations and bytes the PC layer adds to a gpt2_124m step, `bench.pc_launches`)
instead of timing, so it reads the same on any machine.
`--quick`: the smallest settings (seq 32, batch 4, 6 blocks of 2 steps, 2-trial sweeps of 3 steps): a smoke
test of every row, not a measurement. `--strict`: exit 1 when any row is noisy (a quiet machine should give
none). `--steps` / `--repeats`: the callback-share fit and the opt-in compile row (whole runs per repeat).
`sweep` is measured by `python -m sweeps.bench` (the same flags; `make bench` runs both), which merges its
rows into the same --out.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field

from lit_modules.bench.verdict import Target

DEFAULT_ONLY = "lightning,flops,pc,pc_launches,wisca,mols,eval,cells,first,sweep"
KNOWN = set(DEFAULT_ONLY.split(",")) | {"compile"}
WISCA_PERIOD = 250

# Targets shown next to each figure, never failing the bench.
TARGETS = {
    "lightning_speed_vs_plain": Target(">=", 0.96),  # Lightning through its public API only
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
    # 10, not 6: with 6 repeats the median's 95% interval is their whole range; with 10 it drops the two extremes.
    # Whole benches on one host (2026-12-07): the efficiency +-3.3% with 6, +-1.5% with 10; the two speed-ups stay
    # +-7.5% either way (one trial's 2-thread speed-up on a shared VM varies from repeat to repeat: 1.28-1.47).
    sweep_repeats: int = 10
    sweep_trials: int = 6
    sweep_extra: list[str] = field(default_factory=list)
    eval_requests: int = 200
    eval_blocks: int = 32
    gemm_blocks: int = 32  # 20 read +-3.2% once (2026-12-07); a block is ~0.4 s
    inference_repeats: int = 3  # the forward-only rows' interleaves, each in a fresh process (bench.fresh)
    # Forwards per block of those rows: with 5 the three repeats' A/A medians spread over 1.002-1.022 (and 0.948-0.982
    # in a whole bench), with 20 over 0.998-1.014 (one run of each, 2026-12-06): a forward is ~4x shorter than a step.
    inference_block_steps: int = 20


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m lit_modules.bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smallest settings: a smoke test, not a measurement")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--model", default="tiny", help="model of the Lightning, WISCA, MoLS, eval and cell rows")
    parser.add_argument("--models", "--pc-models", dest="models", default=None,
                        help="models of the FLOP and PC rows (default tiny,tiny_x4,small; --quick: tiny)")
    parser.add_argument("--blocks", type=int, default=None, help="blocks per side of each interleaved row (32)")
    parser.add_argument("--block-steps", type=int, default=None, help="steps per block (5)")
    parser.add_argument("--warmup", type=int, default=None, help="steps before the first block (10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the single-threaded rows")
    parser.add_argument("--cell-repeats", type=int, default=None, help="x3: the warm cells of cell_fixed_cost, the processes of each first_sentence row")
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
                     gemm_blocks=6, inference_repeats=1, inference_block_steps=2)
        args.models = args.models or "tiny"
    else:
        # 32 blocks, not 20: four rows of a whole bench alone (2026-12-06) sat at +-3.1-3.4%; the median's
        # order-statistic interval narrows as 1/sqrt(blocks), ~0.79x here.
        s = Settings(blocks=32, block_steps=5, warmup=10)
        args.models = args.models or "tiny,tiny_x4,small"
    for name in ("blocks", "block_steps", "warmup", "cell_repeats", "sweep_repeats", "sweep_trials"):
        if getattr(args, name) is not None:
            setattr(s, name, getattr(args, name))
    s.warmup = math.ceil(s.warmup / s.block_steps) * s.block_steps  # blocks aligned on WISCA's period
    return s
