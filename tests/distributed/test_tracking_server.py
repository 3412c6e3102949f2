"""Runs against an `mlflow server` backed by PostgreSQL with proxied artifacts: resume re-attaching,
FAILED/KILLED, artifacts through the server, evaluation and analysis reading runs back, no credential
recorded."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.helpers.runs import tiny_overrides
from tests.helpers.recorded import places_holding, recorded_texts
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config

pytestmark = pytest.mark.distributed


@pytest.fixture
def server(tracking_server, monkeypatch) -> MlflowClient:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_server.url)
    return MlflowClient(tracking_server.url)


def overrides(runs_dir: Path, experiment: str, **extra: str) -> list[str]:
    return tiny_overrides(runs_dir, steps=20, **{"logger.experiment": experiment, "trainer.num_threads": "1", **extra})


def test_a_paused_run_resumes_into_the_same_run_with_artifacts_served(server, tracking_server, runs_dir, tmp_path):
    experiment = f"resume-{uuid.uuid4().hex[:8]}"
    first = run(compose_run_config(overrides(runs_dir, experiment, **{"trainer.stop_after_steps": "10"})))
    assert first.status == "KILLED" and server.get_run(first.run_id).info.status == "KILLED"
    resume = [f"resume={first.run_id}"]
    again = run(compose_run_config([*overrides(runs_dir, experiment), *resume]), cli_overrides=resume)
    assert (again.run_id, again.status) == (first.run_id, "FINISHED")

    exp = server.get_experiment_by_name(experiment)
    (only,) = server.search_runs([exp.experiment_id])
    assert only.info.status == "FINISHED" and only.data.tags["resumed"] == "true"
    assert [m.step for m in server.get_metric_history(only.info.run_id, "val/loss")] == [9, 19]
    # Artifacts go through the server (proxied), not into a folder that only this machine can see.
    assert exp.artifact_location.startswith("mlflow-artifacts:")
    assert not (runs_dir / "mlartifacts").exists()
    config = Path(server.download_artifacts(only.info.run_id, "run/config.yaml", str(tmp_path)))
    assert "logger:" in config.read_text()
    assert list(tracking_server.artifacts.rglob("config.yaml"))  # on the server's side

    from analysis.load_runs import RunStore

    store = RunStore(runs_dir, tracking=tracking_server.url)
    curves = store.curves(store.runs_frame([store.run(only.info.run_id)]), keys=["val/loss"])
    assert list(curves["step"]) == [9, 19] and curves["value"].iloc[-1] == pytest.approx(again.metrics["val/loss"])


def test_a_crashing_run_ends_failed_and_evaluation_writes_into_a_finished_run(server, runs_dir, capsys):
    from lit_modules.callbacks.divergence import DivergenceError
    from lit_modules.evaluation.run_eval import main as eval_main

    experiment = f"fail-{uuid.uuid4().hex[:8]}"
    with pytest.raises(DivergenceError):
        run(compose_run_config(overrides(runs_dir, experiment, **{
            "optim.lr": "50.0", "optim.grad_clip": "0", "trainer.divergence_factor": "1.5"})))
    exp = server.get_experiment_by_name(experiment)
    (crashed,) = server.search_runs([exp.experiment_id])
    assert crashed.info.status == "FAILED" and crashed.data.tags["end_reason"].startswith("DivergenceError")

    done = run(compose_run_config(overrides(runs_dir, experiment)))
    assert eval_main([f"run={done.run_id}", f"runs_dir={runs_dir}", "tasks=local_cloze_shakespeare", "limit=5"]) == 0, \
        capsys.readouterr().err
    evaluated = server.get_run(done.run_id)
    assert any(key.startswith("eval/local_cloze_shakespeare/") for key in evaluated.data.metrics)
    assert len(server.search_runs([exp.experiment_id])) == 2  # evaluation opened no run of its own


def test_credentials_in_the_tracking_url_are_never_recorded(server, tracking_server, runs_dir, capsys):
    secret = uuid.uuid4().hex
    experiment = f"creds-{uuid.uuid4().hex[:8]}"
    with_password = tracking_server.url.replace("http://", f"http://researcher:{secret}@")
    result = run(compose_run_config(overrides(runs_dir, experiment, **{"logger.tracking_uri": with_password})))
    assert result.status == "FINISHED"
    exp = server.get_experiment_by_name(experiment)
    recorded = server.get_run(result.run_id)
    assert recorded.data.params["logger.tracking_uri"] == tracking_server.url.replace("http://", "http://researcher:***@")
    sidecar = json.loads((Path(recorded.data.tags["checkpoint_dir"]) / "config.json").read_text())
    printed = capsys.readouterr()
    assert places_holding(secret, [*recorded_texts(server, [exp.experiment_id]),
                                   ("sidecar", json.dumps(sidecar)), ("output", printed.out + printed.err)]) == []
