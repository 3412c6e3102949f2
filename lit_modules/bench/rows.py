"""The single-process rows of `make bench`: each appends its Ratios (bench.json keys) and descriptive rows.

Lightning against a plain loop, the FLOP rows and PC levels per model, the technique overheads (WISCA,
MoLS), the eval adapter's batching and a warm cell's fixed cost. The sweep rows span processes and drive
`sweeps.optuna_sweep`, so they live in sweeps/bench.py (nothing in lit_modules imports sweeps).
"""

from __future__ import annotations

import statistics

from lit_modules.bench.settings import SHAPE_TARGET, TARGETS, WISCA_PERIOD, Settings
from lit_modules.bench.steps import bench_config, callback_shares, lightning_workload, plain_workload
from lit_modules.bench.turns import (first_place_effect, interleave, loop_workload, off_thread_share, per_step,
                                      round_ratios)
from lit_modules.bench.verdict import Ratio
from lit_modules.build import build_data, build_model
from lit_modules.config import files


def _thread_ratio(key: str, reference: list, variant: list, invert: bool = False, **kwargs) -> Ratio:
    return Ratio(key, round_ratios(reference, variant, invert=invert), clock="thread", target=TARGETS.get(key),
                 wall=round_ratios(reference, variant, clock="wall", invert=invert), **kwargs)


def _median_step(blocks: list, block_steps: int) -> float:
    return statistics.median(per_step(blocks, block_steps))


def lightning_rows(base: list[str], s: Settings, steps: int, ratios: list, rows: list) -> None:
    timed = interleave({"plain": plain_workload(base), "lightning": lightning_workload(base)},
                       s.blocks, s.block_steps, s.warmup, pacer=plain_workload(base))
    ratio = _thread_ratio("lightning_speed_vs_plain", timed["plain"], timed["lightning"], invert=True, at_most=1.0)
    ratios.append(ratio)
    rows.append({"bench": "lightning_vs_plain", "variant": base[0], "clock": "thread",
                 "plain_s_per_step": _median_step(timed["plain"], s.block_steps),
                 "lightning_s_per_step": _median_step(timed["lightning"], s.block_steps),
                 "speed_vs_plain": ratio.median, "interval_95": ratio.interval,
                 "off_thread_share": off_thread_share(timed["lightning"]),
                 "reference_vs_first_place": first_place_effect(timed, "plain"),
                 "callback_shares_of_step": callback_shares(base, max(steps, s.warmup + 2), warmup=s.warmup)})


def model_rows(models: list[str], s: Settings, flops: bool, pc: bool, ratios: list, derived: dict, rows: list) -> None:
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
        timed = interleave(workloads, s.blocks, s.block_steps, s.warmup, pacer=lightning_workload(mbase))
        if flops:
            scale = analytic / gemm_flops  # 1: the matmuls are the analytic count (tested)
            key = f"shape_rate_fraction_{model}"
            fraction = Ratio(key, tuple(r * scale for r in round_ratios(timed["baseline"], timed["gemms"])),
                             clock="thread", target=SHAPE_TARGET,
                             wall=tuple(r * scale for r in round_ratios(timed["baseline"], timed["gemms"], clock="wall")))
            ratios.append(fraction)
            step_s = _median_step(timed["baseline"], s.block_steps)
            gemm_s = _median_step(timed["gemms"], s.block_steps)
            rates = fl.flop_rates(analytic, step_s, gemm_flops, gemm_s, peak.median if peak else None)
            rows.append({"bench": "flops", "variant": model, "clock": "thread", "tokens_per_step": batch * seq_len,
                         "flops_per_token": analytic / (batch * seq_len), "step_s": step_s, "gemms_s": gemm_s, **rates,
                         "shape_rate_fraction": fraction.median, "interval_95": fraction.interval,
                         "off_thread_share": off_thread_share(timed["baseline"]),
                         "reference_vs_first_place": first_place_effect(timed, "baseline"),
                         "where_the_step_goes": fl.step_profile(mbase, steps=2 if s.block_steps < 5 else 4,
                                                                warmup=min(3, s.warmup))})
        if pc:
            pc_ratios, pc_derived, pc_rows = pc_bench.training_results(model, mbase, timed, s.block_steps)
            ratios += pc_ratios
            derived.update(pc_derived)
            rows += pc_rows


def technique_rows(name: str, key: str, extra: list[str], base: list[str], s: Settings, ratios: list, rows: list) -> None:
    timed = interleave({"baseline": lightning_workload(base), name: lightning_workload([*base, *extra])},
                       s.blocks, s.block_steps, s.warmup, pacer=lightning_workload(base))
    raw = _thread_ratio(key, timed["baseline"], timed[name], at_least=1.0)
    row = {"bench": name, "variant": " ".join(extra), "clock": "thread", "blocks": s.blocks, "block_steps": s.block_steps,
           "off_thread_share": off_thread_share(timed[name]),
           "reference_vs_first_place": first_place_effect(timed, "baseline")}
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


def technique_benches(block_steps: int) -> dict[str, tuple[str, list[str]]]:
    """bench name -> (bench.json key, overrides): each technique's overhead over the baseline step, only
    for techniques that exist in conf/."""
    benches = {
        "wisca": ("wisca_every_250_vs_baseline", ["wisca=qk_vo_tensor", f"techniques.wisca.every_n_steps={block_steps}"]),
        "mols": ("mols_vs_baseline", ["mols=snr"]),
    }
    return {name: b for name, b in benches.items() if files.has_option(*b[1][0].split("=", 1))}


def eval_rows(base: list[str], s: Settings, ratios: list, rows: list) -> None:
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

    def one_at_a_time() -> None:
        for request in requests:
            single.loglikelihood([request])

    def all_batched() -> None:
        batched.loglikelihood(requests)

    timed = interleave({"single": loop_workload(one_at_a_time), "batched": loop_workload(all_batched)},
                       s.eval_blocks, 1, 1, pacer=loop_workload(one_at_a_time))
    notes = () if identical else ("batched scores differ from one-at-a-time scores",)
    ratio = _thread_ratio("eval_batched_vs_single", timed["single"], timed["batched"], invert=True, notes=notes)
    ratios.append(ratio)
    rows.append({"bench": "eval_adapter", "variant": base[0], "clock": "thread", "n_requests": s.eval_requests,
                 "batch_size": 16, "identical": identical, "speedup": ratio.median, "interval_95": ratio.interval,
                 "reference_vs_first_place": first_place_effect(timed, "single"),
                 "single_rps": s.eval_requests / _median_step(timed["single"], 1),
                 "batched_rps": s.eval_requests / _median_step(timed["batched"], 1)})


def cell_rows(base: list[str], s: Settings, ratios: list, rows: list) -> None:
    from lit_modules.bench.cells import cell_fixed_cost

    # 3 x cell_repeats warm cells (~0.3 s each): 10 gave a +-5% interval for the median, wall clock.
    cost = cell_fixed_cost(base, 3 * s.cell_repeats, steps=s.cell_steps, phases=True)
    ratio = Ratio("cell_fixed_cost_s", tuple(cost["warm_s"]), clock="wall", target=TARGETS["cell_fixed_cost_s"])
    ratios.append(ratio)
    rows.append({"bench": "cell_fixed_cost", "variant": base[0], "clock": "wall", "median_s": ratio.median,
                 "interval_95": ratio.interval, **cost})
