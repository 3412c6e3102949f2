"""A mixture-of-experts model through the real entry point: it resumes exactly, trains under DDP like one
process, and the techniques (WISCA on the attention pairs, small init, the PC layer on expert projections,
MoLS with the experts and the router as groups of their own) run on it, with the expert-load diagnostic."""

from __future__ import annotations

import pytest
import torch
from mlflow.tracking import MlflowClient

from lit_modules.config.composition import compose_run_config
from lit_modules.rebuild import trained_model
from lit_modules.runs.finished import finished_run
from lit_modules.train import run
from tests.helpers.runs import all_runs, tiny_overrides

MOE = {"model": "tiny_moe"}


def _model(runs_dir, run_id):
    client = MlflowClient(f"sqlite:///{runs_dir}/mlflow.db")
    return trained_model(finished_run(client, run_id).checkpoint)


def test_a_paused_moe_run_resumes_exactly(tmp_path):
    paused = run(compose_run_config(tiny_overrides(tmp_path, steps=8, **MOE, **{"trainer.stop_after_steps": "4"})))
    assert paused.status == "KILLED"
    resumed = run(compose_run_config(tiny_overrides(tmp_path, steps=8, **MOE, resume=paused.run_id)))
    straight = run(compose_run_config(tiny_overrides(tmp_path / "straight", steps=8, **MOE)))
    assert resumed.status == straight.status == "FINISHED"
    assert resumed.metrics["val/loss"] == straight.metrics["val/loss"]
    a, b = _model(tmp_path, resumed.run_id).state_dict(), _model(tmp_path / "straight", straight.run_id).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    history = MlflowClient(f"sqlite:///{tmp_path}/straight/mlflow.db").get_metric_history(straight.run_id, "train/moe_aux")
    assert history and all(m.value > 0 for m in history)


@pytest.mark.slow
def test_moe_ddp_two_processes_match_one_process(tmp_path):
    # The load-balancing loss is computed per rank (over its own tokens, as in Switch), so it is switched off
    # here: with it, two ranks optimize the mean of two local losses, not the global-batch one.
    extra = {**MOE, "model.moe_aux_coef": "0"}
    single = run(compose_run_config(tiny_overrides(tmp_path, steps=10, **extra, **{"data.batch_size": "8", "data.val_batches": "4"})))
    ddp = run(compose_run_config(tiny_overrides(tmp_path, steps=10, trainer="ddp", **extra,
                                                **{"data.batch_size": "4", "data.val_batches": "8"})))
    assert ddp.status == "FINISHED" and len(all_runs(tmp_path)) == 2
    assert abs(single.metrics["val/loss"] - ddp.metrics["val/loss"]) < 1e-4, (single.metrics["val/loss"], ddp.metrics["val/loss"])


def test_the_techniques_run_on_a_moe_model(tmp_path):
    overrides = tiny_overrides(tmp_path, steps=8, **MOE, init="small", wisca="qk_vo_tensor", pc_layer="level4", mols="snr", **{
        "techniques.wisca.every_n_steps": "4", "+techniques.pc_layer.experts": "true",
        "techniques.mols.modules": "[qk,vo,experts,router]", "techniques.mols.estimate_step": "1",
        "techniques.mols.extra_micro_batches": "2", "schedule.warmup_fraction": "0.5",
        "init.router_std": "0.0", "diagnostics.names": "[expert_load]", "trainer.log_every_n_steps": "1"})
    result = run(compose_run_config(overrides))
    assert result.status == "FINISHED"
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    metrics = client.get_run(result.run_id).data.metrics
    assert metrics["wisca/transitions"] == 2.0
    assert {"mols/alpha/experts", "mols/alpha/router"} <= set(metrics)
    assert 0 < metrics["diag/expert_load/entropy"] <= 1 and "diag/expert_load/layer1/max_share" in metrics
    assert client.get_run(result.run_id).data.tags["pc.experts"] == "true"
