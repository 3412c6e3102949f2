"""The GPU check's CPU path (one sentence, exit 0, nothing written) and its MFU arithmetic against
torch's own FLOP counter; the peak table is the throughput callback's, knowing A100, H100 and H200."""

from __future__ import annotations

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
