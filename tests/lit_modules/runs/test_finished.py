"""A finished run as the tools read it: refusals name the argument, and the model comes back exactly."""

from __future__ import annotations

import pytest
import torch

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.rebuild import inference_view, trained_model
from lit_modules.runs.finished import RunCheckpoint, finished_run
from lit_modules.runs.store import open_store
from lit_modules.train import run
from tests.helpers.runs import mlflow_client, tiny_overrides


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    runs_dir = tmp_path_factory.mktemp("runs")
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=6)))
    assert result.status == "FINISHED"
    return runs_dir, result.run_id


def test_the_run_its_config_and_its_trained_model(trained):
    runs_dir, run_id = trained
    found = finished_run(open_store(runs_dir), run_id, key="run", require_finished=True)
    assert found.status == "FINISHED" and found.config["model"]["name"] == "tiny"
    assert found.metric("val/loss") == pytest.approx(mlflow_client(runs_dir).get_run(run_id).data.metrics["val/loss"])
    view = inference_view(found)
    state = torch.load(found.checkpoint.path, map_location="cpu", weights_only=True)["state_dict"]
    assert view.step == 6 and torch.equal(view.model.lm_head.weight, state["model.lm_head.weight"])
    rebuilt = trained_model(RunCheckpoint(found.checkpoint.path))
    assert all(torch.equal(a, b) for a, b in zip(rebuilt.state_dict().values(), view.model.state_dict().values()))


def test_refusals_name_the_argument(trained, tmp_path):
    runs_dir, run_id = trained
    client = open_store(runs_dir)
    with pytest.raises(ConfigError, match="base_run=0123 is not a run in the MLflow store"):
        finished_run(client, "0123", key="base_run")
    killed = client.create_run(client.get_run(run_id).info.experiment_id).info.run_id
    client.set_terminated(killed, status="KILLED")
    with pytest.raises(ConfigError, match=f"base_run={killed} is KILLED, not FINISHED"):
        finished_run(client, killed, key="base_run", require_finished=True)
    with pytest.raises(ConfigError, match=f"run={killed} has no checkpoint"):
        finished_run(client, killed)
    with pytest.raises(ConfigError, match="There is no MLflow store at"):
        open_store(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()
