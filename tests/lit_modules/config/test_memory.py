"""The dry run's memory estimate (a known answer by hand) and a GPU plan made on a machine without one."""

from pathlib import Path

import pytest
import torch

from lit_modules.config.budget import compute_budget
from lit_modules.config.composition import compose_run_config
from lit_modules.config.memory import GIB, estimate_memory
from lit_modules.config.validate import validate
from lit_modules.train import run


def test_estimate_counts_fp32_weights_grads_two_adam_moments_and_the_kept_activations() -> None:
    cfg = validate(compose_run_config(["model=tiny", "data.batch_size=8", "data.seq_len=64"]))
    budget = compute_budget(cfg)
    est = estimate_memory(cfg, budget)
    p = budget.params_total
    assert (est.weights, est.grads, est.optimizer) == (4 * p, 4 * p, 8 * p)
    m = cfg.model  # tiny: d 64, 2 layers, 4 heads (no GQA), d_ff 192, byte vocab 259; fp32 activations on the CPU
    per_layer_token = 2 * 64 + 64 + 2 * 64 + 64 + 64 + 3 * 192
    assert (m.d_model, m.n_layers, m.d_ff, m.vocab_size) == (64, 2, 192, 259)
    assert est.activations == 8 * 64 * (2 * per_layer_token * 4 + 2 * 4 * 259)
    assert est.total == est.weights + est.grads + est.optimizer + est.activations
    muon = estimate_memory(validate(compose_run_config(["optim=muon"])), budget)
    assert muon.optimizer == 4 * p  # one momentum


@pytest.mark.skipif(torch.cuda.is_available(), reason="plans a GPU run on a machine that has none")
def test_a_dry_run_plans_a_gpu_run_without_a_gpu_and_a_real_run_is_still_refused(runs_dir: Path, capsys) -> None:
    """Before: the dry run itself was refused ("needs a CUDA device"), though the README says to check with it."""
    result = run(compose_run_config([f"runs_dir={runs_dir}", "dry_run=true", "model=llama_271m", "trainer=gpu"]))
    out = capsys.readouterr().out
    assert result.status == "DRY_RUN"
    assert "memory       ~" in out and "GiB per device" in out and "this machine has no GPU" in out
    gib = estimate_memory(validate(compose_run_config(["dry_run=true", "model=llama_271m", "trainer=gpu"])),
                          result.budget).total / GIB
    assert 3 < gib < 10  # 271M params x 16 bytes = 4 GiB of state, plus bf16 activations of 8 x 256 tokens
    with pytest.raises(Exception, match="needs a CUDA device"):
        validate(compose_run_config(["model=llama_271m", "trainer=gpu"]))
    assert not runs_dir.exists()
