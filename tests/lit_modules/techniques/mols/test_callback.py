"""MoLS inside real Lightning runs: the estimate leaves weights, optimizer state, .grad and RNG untouched
(alpha = 1 reproduces the baseline bit for bit), SNRs and alphas are logged, and under Muon only the
AdamW-managed groups are scaled. (Ramp and resume: test_callback_resume.py.)"""

import math

import pytest
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config
from tests.helpers.mols import AT, GROUPS, STEPS, MoLSProbe, mols_run, overrides, same
from tests.helpers.runs import mlflow_client

def test_estimate_changes_nothing_and_alpha_one_reproduces_the_baseline(tmp_path):
    baseline = MoLSProbe()
    assert run(compose_run_config(overrides(tmp_path / "a")), extra_callbacks=[baseline]).status == "FINISHED"
    result, probe = mols_run(tmp_path / "b", "techniques.mols.clip_min=1.0", "techniques.mols.clip_max=1.0")
    assert probe.estimated_at_check and probe.mols.start_step == AT
    assert probe.unchanged == {"weights": True, "grads": True, "optimizer_state": True, "rng": True}
    # alpha = 1 everywhere: the K extra micro-batches must not have shifted data, RNG or optimizer.
    assert same(probe.final_weights, baseline.final_weights)
    metrics = mlflow_client(tmp_path / "b").get_run(result.run_id).data.metrics
    assert all(metrics[f"mols/alpha/{g}"] == 1.0 for g in GROUPS)
    assert all(math.isfinite(metrics[f"mols/snr/{g}"]) and metrics[f"mols/snr/{g}"] > 0 for g in GROUPS)
    assert metrics["mols/estimate_seconds"] > 0


def test_under_muon_only_adamw_groups_move(tmp_path):
    _, probe = mols_run(tmp_path, "optim=muon")
    last = probe.lrs[STEPS - 1]
    assert last["emb"][1] == pytest.approx(probe.mols.alpha["emb"]) and last["emb"][1] != 1.0
    assert last["head"][1] == pytest.approx(probe.mols.alpha["head"])
    assert all(last[g][1] == 1.0 for g in ("qk", "vo", "mlp"))
