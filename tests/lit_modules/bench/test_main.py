"""`make bench` writes bench.json with medians, 95 % intervals, clocks, targets and `noisy`; --strict fails
on a noisy row; the sweep rows are sweeps.bench's (tests/sweeps/test_bench.py)."""

from __future__ import annotations

import json

import pytest

from lit_modules.bench import rows as bench_rows
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
    assert details["lightning_speed_vs_plain"]["target"]["bound"] == 0.96
    assert details["pc_merged_inference_vs_plain"]["target"]["op"] == "<="
    assert written["method"]["quick"] is True and written["machine"]["torch_threads"] == 1
    flops_row = next(r for r in written["rows"] if r["bench"] == "flops")
    assert flops_row["shape_rate_fraction"] == written["shape_rate_fraction_tiny"]
    assert 0 < flops_row["where_the_step_goes"]["gemm_share"] <= 1
    assert next(r for r in written["rows"] if r["bench"] == "eval_adapter")["identical"] is True
    printed = capsys.readouterr().out
    assert "95% interval" in printed and "thread" in printed and ">= 0.96" in printed


def test_strict_fails_on_a_noisy_row(tmp_path, monkeypatch):
    def one_value(base, s, ratios, rows):
        ratios.append(Ratio("eval_batched_vs_single", (3.0,), clock="thread"))

    monkeypatch.setattr(bench_rows, "eval_rows", one_value)
    out = tmp_path / "bench.json"
    assert main(["--only", "eval", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["noisy"] == ["eval_batched_vs_single"]
    assert main(["--only", "eval", "--out", str(out), "--strict"]) == 1


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
