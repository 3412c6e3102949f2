"""End-to-end: tiny runs with the PC layer (AdamW and Muon), the saved u/v/gamma, export of merged weights,
and exact resume."""

import json
import math

import pytest
import torch
from tests.helpers.runs import mlflow_client, tiny_overrides

from lit_modules.rebuild import rebuild_model
from lit_modules.runs.finished import config_on_schema
from lit_modules.export.__main__ import main as export_main
from lit_modules.export.plain import export_plain, load_merged
from lit_modules.techniques.pc_layer.merge import DEFAULT_MERGE_ITERS
from lit_modules.techniques.pc_layer.parametrization import pc_modules, raw_weight, refresh_all
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config


def _run(runs_dir, steps=20, *extra):
    cfg = compose_run_config([*tiny_overrides(runs_dir, steps=steps), *extra])
    return run(cfg)


def _checkpoint(runs_dir, run_id):
    return runs_dir / "checkpoints" / run_id / "last.ckpt"


def _model_from_checkpoint(ckpt):
    config = json.loads((ckpt.parent / "config.json").read_text())["config"]
    model = rebuild_model(config_on_schema(config))
    state = torch.load(ckpt, map_location="cpu", weights_only=True)["state_dict"]
    model.load_state_dict({k[len("model.") :]: v for k, v in state.items() if k.startswith("model.")})
    return model.eval(), state


@pytest.fixture(scope="module")
def adamw_run(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("pc_adamw") / "runs"
    result = _run(runs_dir, 20, "pc_layer=level4", "diagnostics.names=[gmcn]")
    return runs_dir, result


def test_pc_level4_adamw_run_completes_and_logs_gmcn(adamw_run):
    runs_dir, result = adamw_run
    assert result.status == "FINISHED"
    assert math.isfinite(result.metrics["val/loss"])
    client = mlflow_client(runs_dir)
    tags = client.get_run(result.run_id).data.tags
    assert tags["pc.level"] == "4" and tags["fidelity.pc_layer.coefficients"] == "confirmed"
    history = client.get_metric_history(result.run_id, "diag/gmcn/pc")
    assert len(history) >= 2 and all(m.value > 1 for m in history)  # at the start and at the end
    assert client.get_metric_history(result.run_id, "diag/gmcn/no_pc")


def test_checkpoint_holds_refreshed_u_v_and_trained_gammas(adamw_run):
    runs_dir, result = adamw_run
    model, state = _model_from_checkpoint(_checkpoint(runs_dir, result.run_id))
    assert any(k.endswith("parametrizations.weight.0.u") for k in state)
    gammas = [k for k in state if k.endswith("parametrizations.weight.0.gamma")]
    assert len(gammas) == 4 * 2  # gate, up, down, o in each of the tiny model's 2 layers
    assert any(abs(state[k].item() - 1.0) > 1e-4 for k in gammas)  # gamma was trained
    for name, module, pc in pc_modules(model):
        w = raw_weight(module).detach()
        true_top = torch.linalg.svdvals(w.double())[0].item()
        # Refreshed after the last step (10 warm-started iterations per step): within 1 %.
        assert pc.sigma(w).item() == pytest.approx(true_top, rel=0.01), name


def test_export_gives_a_plain_model_with_the_same_logits(adamw_run, tmp_path):
    runs_dir, result = adamw_run
    ckpt = _checkpoint(runs_dir, result.run_id)
    out = export_plain(str(ckpt), tmp_path / "merged.pt")
    plain = load_merged(out)
    assert not any("parametrizations" in k for k in plain.state_dict())
    model, _ = _model_from_checkpoint(ckpt)
    refresh_all(model, DEFAULT_MERGE_ITERS)  # prepare_for_inference refreshes u, v before merging
    x = torch.randint(0, model.cfg.vocab_size, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(plain.eval()(x), model(x), rtol=1e-5, atol=1e-5)


def test_export_cli(adamw_run, tmp_path):
    runs_dir, result = adamw_run
    assert export_main(["plain", str(_checkpoint(runs_dir, result.run_id)), str(tmp_path / "m.pt")]) == 0
    assert (tmp_path / "m.pt").is_file()


def test_pc_level2_with_muon_and_accumulation(tmp_path):
    result = _run(tmp_path / "runs", 10, "pc_layer=level2", "optim=muon", "trainer.accumulate_grad_batches=2")
    assert result.status == "FINISHED" and math.isfinite(result.metrics["val/loss"])


@pytest.mark.slow
def test_resume_is_exact_with_pc(tmp_path):
    """u, v are saved after each step's refresh and not refreshed again on resume."""
    straight = _run(tmp_path / "a", 16, "pc_layer=level4")
    first = _run(tmp_path / "b", 16, "pc_layer=level4", "trainer.stop_after_steps=8")
    assert first.status == "KILLED"
    cfg = compose_run_config(
        [
            *tiny_overrides(tmp_path / "b", steps=16),
            "pc_layer=level4",
            f"resume={_checkpoint(tmp_path / 'b', first.run_id)}",
        ]
    )
    resumed = run(cfg)
    a = torch.load(_checkpoint(tmp_path / "a", straight.run_id), weights_only=True)["state_dict"]
    b = torch.load(_checkpoint(tmp_path / "b", resumed.run_id), weights_only=True)["state_dict"]
    assert set(a) == set(b)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0, msg=key)
