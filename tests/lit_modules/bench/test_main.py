"""`make bench` writes bench.json with medians, 95 % intervals, clocks, targets and `noisy`; --strict fails
on a noisy row; the sweep row's arithmetic on known timelines (no time is asserted)."""

from __future__ import annotations

import json

import pytest

from lit_modules.bench import __main__ as bench
from lit_modules.bench.__main__ import main
from lit_modules.bench.verdict import Ratio


def test_the_quick_bench_writes_every_single_process_row(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert main(["--quick", "--only", "lightning,flops,pc,wisca,mols,eval", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    keys = {"lightning_speed_vs_plain", "gemm_peak_gflops", "shape_rate_fraction_tiny", "pc_tiny_level4_vs_baseline",
            "pc_excess_over_math_tiny_level4", "pc_merged_inference_vs_plain", "wisca_every_250_vs_baseline",
            "mols_vs_baseline", "eval_batched_vs_single"}
    assert keys <= set(written)
    details = written["details"]
    assert set(written["noisy"]) <= set(details)
    for key in keys - {"pc_excess_over_math_tiny_level4"}:
        assert details[key]["clock"] == "thread" and details[key]["n"] >= 6 and details[key]["interval_95"]
    assert details["lightning_speed_vs_plain"]["target"]["bound"] == 0.98
    assert details["pc_merged_inference_vs_plain"]["target"]["op"] == "<="
    assert written["method"]["quick"] is True and written["machine"]["torch_threads"] == 1
    flops_row = next(r for r in written["rows"] if r["bench"] == "flops")
    assert flops_row["shape_rate_fraction"] == written["shape_rate_fraction_tiny"]
    assert 0 < flops_row["where_the_step_goes"]["gemm_share"] <= 1
    assert next(r for r in written["rows"] if r["bench"] == "eval_adapter")["identical"] is True
    printed = capsys.readouterr().out
    assert "95% interval" in printed and "thread" in printed and ">= 0.98" in printed


def test_strict_fails_on_a_noisy_row(tmp_path, monkeypatch):
    def one_value(base, s, ratios, rows):
        ratios.append(Ratio("eval_batched_vs_single", (3.0,), clock="thread"))

    monkeypatch.setattr(bench, "_eval_rows", one_value)
    out = tmp_path / "bench.json"
    assert main(["--only", "eval", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["noisy"] == ["eval_batched_vs_single"]
    assert main(["--only", "eval", "--out", str(out), "--strict"]) == 1


def test_the_sweep_row_on_known_timelines(monkeypatch, tmp_path):
    # One worker: 6 trials of 10 s with 1 s between them (span 65 s). Two workers: trials of 16 s (one
    # thread each), the second worker starting 6 s late, 1 s gaps: spans 16+1+16+1+16 = 50 s and 56 s.
    def fake(workers, trials, extra, trial_seconds, timelines):
        if workers == 1:
            spans = [(11.0 * i, 11.0 * i + 10.0) for i in range(6)]
        else:
            spans = sorted([(17.0 * i, 17.0 * i + 16.0) for i in range(3)] +
                           [(6.0 + 17.0 * i, 22.0 + 17.0 * i) for i in range(3)])
        trial_seconds.append(16.0 if workers == 2 else 10.0)
        timelines.append({"span_s": max(e for _, e in spans), "trials": spans,
                          "workers": bench_cells.assign_workers(spans), "startup_s": 7.0, "teardown_s": 5.0})
        return timelines[-1]["span_s"]

    from lit_modules.bench import cells as bench_cells

    monkeypatch.setattr(bench_cells, "sweep_seconds", fake)
    ratios, rows = [], []
    bench._sweep_rows(bench.Settings(blocks=6, block_steps=1, warmup=0, sweep_repeats=2), ratios, rows)
    by_key = {r.key: r for r in ratios}
    assert by_key["sweep_2_workers_vs_1"].median == pytest.approx(65 / 56)
    assert by_key["sweep_2_workers_ideal"].median == pytest.approx(2 / 1.6)  # one trial: 1.6x faster on 2 threads
    assert by_key["sweep_2_workers_efficiency"].median == pytest.approx((65 / 56) / 1.25)
    assert by_key["sweep_2_workers_efficiency"].target.bound == 0.95
    row = rows[0]
    assert row["two_workers_start_skew_s"] == [6.0, 6.0] and row["two_workers_median_gap_s"] == [1.0, 1.0]
    assert row["one_worker_median_gap_s"] == [1.0, 1.0] and row["two_workers_tail_s"] == [6.0, 6.0]
    assert row["efficiency_without_start_skew"][0] == pytest.approx((65 / 50) / 1.25)


def test_an_unknown_bench_is_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["--only", "eval,speed", "--out", str(tmp_path / "b.json")])
    assert refused.value.code == 2
    assert "--only: unknown bench speed" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()


@pytest.mark.slow
def test_the_quick_bench_has_the_issues_keys_for_every_model(tmp_path):
    out = tmp_path / "bench.json"
    assert main(["--quick", "--only", "flops,pc", "--models", "tiny,tiny_x4,small", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert {"gemm_peak_gflops", "shape_rate_fraction_tiny", "shape_rate_fraction_tiny_x4", "shape_rate_fraction_small",
            "pc_excess_over_math_tiny_x4_level4"} <= set(written)
    assert written["details"]["pc_excess_over_math_tiny_x4_level4"]["target"]["bound"] == 5.0
