"""MoLS inside real Lightning runs: the estimate leaves weights, optimizer state, .grad and RNG untouched
(alpha = 1 reproduces the baseline bit for bit), SNRs and alphas are logged, and under Muon only the
AdamW-managed groups are scaled. (Ramp and resume: test_mols_resume.py.)"""

import math

import pytest
from conftest import mlflow_client, tiny_overrides
from test_mols_probe import MoLSProbe, same

from lit_modules.train import run
from sweeps.compose import compose_run_config

STEPS, WARMUP, AT = 16, 8, 2
GROUPS = ("emb", "qk", "vo", "mlp", "head")
MOLS = ("mols=snr", f"techniques.mols.estimate_step={AT}", "techniques.mols.extra_micro_batches=4")


def overrides(runs_dir, *extra: str) -> list[str]:
    return [
        *tiny_overrides(
            runs_dir, steps=STEPS, **{"trainer.log_every_n_steps": "1", "trainer.val_every_n_steps": "100"}
        ),
        "schedule.warmup_fraction=0.5",
        *extra,
    ]


def mols_run(runs_dir, *extra: str):
    probe = MoLSProbe(estimate_step=AT)
    cfg = compose_run_config(overrides(runs_dir, *MOLS, *extra))
    result = run(cfg, extra_callbacks=[probe])
    assert result.status == "FINISHED"
    return result, probe


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
