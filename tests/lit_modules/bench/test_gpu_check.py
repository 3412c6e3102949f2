"""The GPU check's CPU path (one sentence, exit 0, nothing written) and its MFU arithmetic against
torch's own FLOP counter; the peak table is the throughput callback's, knowing A100, H100 and H200; the
budget, the results file, the profile's reading, and every part at smoke scale on the CPU."""

from __future__ import annotations

import json

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from lit_modules.bench import gpu_check
from lit_modules.model import Llama, LlamaConfig


def test_without_a_gpu_it_says_so_in_one_sentence_and_exits_0(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "bench_results" / "gpu.json"
    assert gpu_check.main(["--out", str(out)]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == gpu_check.NO_GPU and printed.count(". ") == 0 and "\n" not in printed
    assert not out.exists() and not out.parent.exists()


def test_bad_options_are_refused_before_anything_runs(capsys):
    with pytest.raises(SystemExit) as refused:
        gpu_check.main(["--only", "throughput,speed"])
    assert refused.value.code == 2


@pytest.mark.parametrize(
    "name, tflops",
    [("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA H200", 989.0), ("NVIDIA A100-SXM4-80GB", 312.0)],
)
def test_peak_table_knows_the_big_three(name: str, tflops: float):
    assert gpu_check.peak_of(name) == tflops * 1e12


def test_an_unknown_device_has_no_peak_and_no_mfu():
    assert gpu_check.peak_of("Tesla T4") is None
    assert gpu_check.mfu(1e6, 1e9, gpu_check.peak_of("Tesla T4")) is None


def test_mfu_arithmetic_matches_the_flop_counter():
    cfg = LlamaConfig(vocab_size=512, d_model=64, n_layers=2, n_heads=4, d_ff=160, max_seq_len=64)
    torch.manual_seed(0)
    model = Llama(cfg)
    batch, seq_len = 3, 64
    idx = torch.randint(0, cfg.vocab_size, (batch, seq_len))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:  # MATH: bmm the counter sees
        model(idx).float().sum().backward()
    counted = counter.get_total_flops()
    analytic = gpu_check.train_step_flops(model, batch, seq_len)
    assert abs(analytic - counted) / counted < 0.02
    # A step of 0.5 s on a 989 TFLOP/s part: MFU is the counted FLOPs over what the part could have done.
    seconds, peak = 0.5, gpu_check.peak_of("NVIDIA H100 80GB HBM3")
    tokens_per_s = batch * seq_len / seconds
    expected = counted / seconds / peak
    assert gpu_check.mfu(tokens_per_s, analytic / (batch * seq_len), peak) == pytest.approx(expected, rel=0.02)


def test_results_are_named_by_the_device():
    assert gpu_check.device_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu_check.device_slug("NVIDIA H100 PCIe") == "h100_pcie"
    assert gpu_check.device_slug("NVIDIA H200") == "h200" and gpu_check.device_slug("NVIDIA GH200 480GB") == "gh200"
    assert gpu_check.device_slug("Tesla T4") == "tesla_t4"


def test_cpu_runs_only_as_the_smoke_run(capsys):
    with pytest.raises(SystemExit) as refused:
        gpu_check.main(["--device", "cpu"])
    assert refused.value.code == 2


def test_a_spent_budget_skips_every_part_and_still_writes_the_file(tmp_path, capsys):
    out = tmp_path / "cpu.json"
    assert gpu_check.main(["--smoke", "--device", "cpu", "--budget-s", "0.000001", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["command"].startswith("python -m lit_modules.bench.gpu_check --smoke") and report["commit"]
    assert [report["gpu_check"][part]["skipped"] for part in gpu_check.PARTS] == [
        "the 0 s budget is spent"] * len(gpu_check.PARTS)


def test_a_profiled_window_names_its_kernels_and_shares():
    from lit_modules.bench.gpu_fit import format_profile, gpu_fit

    timing = gpu_fit(["trainer.num_threads=1", "data.seq_len=32", "data.batch_size=4"], steps=3, warmup=1,
                     profile_steps=2)
    profile = timing.profile
    assert timing.seconds_per_step > 0 and timing.tokens_per_step == 128 and profile["steps"] == 2
    names = [k["name"] for k in profile["top_kernels"]]
    assert "aten::mm" in names and len(names) == 10
    assert 0 < profile["optimizer_share"] < 1 and 0 <= profile["data_share"] < 1
    assert profile["launch_gap_share"] is None  # a CPU has no device idle time to measure
    assert "optimizer" in format_profile(profile) and "aten::mm" in format_profile(profile)


@pytest.mark.slow  # ~2-3 min on 2 busy cores: make test-slow
def test_every_part_runs_on_the_cpu_smoke_scale(tmp_path):
    out = tmp_path / "cpu.json"
    assert gpu_check.main(["--smoke", "--device", "cpu", "--out", str(out)]) == 0
    checked = json.loads(out.read_text())["gpu_check"]
    assert not [part for part in gpu_check.PARTS if "error" in checked[part]], checked
    assert checked["throughput"]["profile"]["top_kernels"] and checked["throughput"]["tokens_per_s"] > 0
    assert checked["resume"]["verdict"] == "exact"
    assert {"pc_level4_vs_baseline", "wisca_vs_baseline", "mols_vs_baseline"} <= set(checked["techniques"])
    assert len(checked["pc_vs_baseline"]["val_loss_pc_minus_baseline"]) == 2
    assert [row["cells"] for row in checked["cells"]["rows"]] == [1, 2]
    assert all(row["aggregate_tokens_per_s"] > 0 for row in checked["cells"]["rows"])
    assert checked["techniques_compiled"] == {"skipped": "no compile on the CPU smoke run",
                                              "seconds": checked["techniques_compiled"]["seconds"]}
