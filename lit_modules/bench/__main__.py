"""`make bench` (`python -m lit_modules.bench`, then `python -m sweeps.bench`): speed ratios measured in one
process, on the same model, data and threads; the method, the flags and the targets are in
`bench.settings`, the rows in `bench.rows`, the table in `bench.printing`, bench.json in `bench.record`.

The sweep rows (two sweep workers, the second worker's late start) run `sweeps.optuna_sweep`, so they are
measured by `python -m sweeps.bench` (same flags), which merges them into the same bench.json: nothing in
lit_modules imports or starts sweeps.
"""

from __future__ import annotations

import os
import sys

import torch

from lit_modules.bench import rows as bench_rows
from lit_modules.bench.printing import print_summary
from lit_modules.bench.record import machine_of, summary_of, write
from lit_modules.bench.settings import parse_args, settings_of
from lit_modules.bench.verdict import Ratio
from lit_modules.quiet import quiet_libraries
from lit_modules.steady_heap import steady_heap


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    s = settings_of(args)
    quiet_libraries()  # Lightning's banners and known warnings, once per measured fit, bury the figures
    heap = steady_heap()  # as every training run has it (training_run.run): no page faults in the blocks
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
            bench_rows.lightning_rows(base, s, args.steps, ratios, rows)
        if wanted & {"flops", "pc"}:
            bench_rows.model_rows(args.models.split(","), s, "flops" in wanted, "pc" in wanted, ratios, derived, rows)
        if "pc" in wanted:
            from lit_modules.bench.pc_layer_rows import inference_ratios

            inf_ratios, inf_rows = inference_ratios(args.model, s.blocks, s.inference_block_steps, extra=s.extra,
                                                  repeats=s.inference_repeats)
            ratios += inf_ratios
            rows += inf_rows
        if "pc_launches" in wanted:
            from lit_modules.bench.pc_launches import STEPS, pc_launch_rows

            count_ratios, count_rows = pc_launch_rows(s.extra, steps=2 if args.quick else STEPS)
            ratios += count_ratios
            rows += count_rows
        benches = bench_rows.technique_benches(s.block_steps)
        for name in ("wisca", "mols"):
            if name in wanted and name in benches:
                bench_rows.technique_rows(name, *benches[name], base, s, ratios, rows)
        if "eval" in wanted:
            bench_rows.eval_rows(base, s, ratios, rows)
        if "cells" in wanted:
            bench_rows.cell_rows(base, s, ratios, rows)
        if "first" in wanted:
            from lit_modules.bench.first_sentence import first_sentence_rows

            first_sentence_rows(s.cell_repeats, ratios, rows)
        if "compile" in wanted:
            from lit_modules.bench.compile import compile_rows

            torch.set_num_threads(threads_before)
            compile_ratios, compile_rows_ = compile_rows(args.models.split(","), args.steps, args.repeats)
            ratios += compile_ratios
            rows += compile_rows_
    finally:
        torch.set_num_threads(threads_before)
    method = {
        "interval": "distribution-free 95% interval for the median from order statistics (binomial ranks)",
        "figure_when": "interval within +-3% of the median", "thread": "time.thread_time of the timing thread "
        f"({args.threads} torch thread(s)), blocks interleaved behind a pacer: P A B, P B A, ... P, "
        "each block over the reference's of its round", "wall": "time.perf_counter, over repeats",
        "heap": heap, "blocks": s.blocks, "block_steps": s.block_steps, "warmup": s.warmup, "quick": args.quick}
    command = " ".join(["python -m lit_modules.bench", *(argv if argv is not None else sys.argv[1:])])
    summary = summary_of(ratios, derived, rows, method, machine_of(load_before, args.threads, command))
    write(args.out, summary)
    print_summary(summary)
    print(f"written: {args.out}" + ("; the sweep rows: python -m sweeps.bench" if "sweep" in wanted else ""))
    return 1 if args.strict and summary["noisy"] else 0


if __name__ == "__main__":
    sys.exit(main())
