"""`run_eval` on a finished run: results land in that same MLflow run, no new run is opened, and bad
input (unknown run, no checkpoint, standard tasks offline) ends with one sentence and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from lit_modules.evaluation.run_eval import main


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from lit_modules.train import run
    from lit_modules.config.composition import compose_run_config

    runs_dir = tmp_path_factory.mktemp("runs")
    before = torch.get_num_threads()
    cfg = compose_run_config(
        ["regime=steps", "trainer.max_steps=20", f"runs_dir={runs_dir}", "trainer.num_threads=1"]
    )
    try:
        result = run(cfg)
    finally:
        torch.set_num_threads(before)
    assert result.status == "FINISHED"
    return runs_dir, result.run_id


def _client(runs_dir) -> MlflowClient:
    return MlflowClient(f"sqlite:///{runs_dir / 'mlflow.db'}")


def _all_runs(client: MlflowClient) -> list[str]:
    experiments = [e.experiment_id for e in client.search_experiments()]
    return sorted(r.info.run_id for r in client.search_runs(experiments))


def test_results_land_in_the_run_they_belong_to(finished_run, capsys):
    runs_dir, run_id = finished_run
    client = _client(runs_dir)
    runs_before = _all_runs(client)
    code = main(
        [
            f"run={run_id}",
            f"runs_dir={runs_dir}",
            "tasks=local_cloze_shakespeare,local_ppl_shakespeare",
            "limit=5",
            "token_logprobs_windows=4",
            "probe=true",
            "probe_passages=40",
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert _all_runs(client) == runs_before  # no new run
    record = client.get_run(run_id)
    assert record.info.status == "FINISHED"
    metrics = record.data.metrics
    for name in (
        "eval/local_cloze_shakespeare/acc",
        "eval/local_cloze_shakespeare/acc_norm",
        "eval/local_ppl_shakespeare/bits_per_byte",
        "eval/probe/layer_0/acc",
        "eval/probe/majority_acc",
    ):
        assert name in metrics
    assert not any(k.startswith("eval/local_nextsent") for k in metrics)
    assert record.data.tags["eval.batch_size"] == "16" and record.data.tags["eval.add_bos"] == "True"
    assert record.data.tags["eval.max_seq_len"] == "128"  # the training length, not the model's 256
    history = client.get_metric_history(run_id, "eval/local_ppl_shakespeare/bits_per_byte")
    assert [m.step for m in history] == [20]  # logged at the checkpoint's step
    artifacts = {a.path for a in client.list_artifacts(run_id, "eval")}
    assert {
        "eval/lm_eval_results.json",
        "eval/samples",
        "eval/token_logprobs.npz",
        "eval/probe.json",
    } <= artifacts
    samples = {a.path for a in client.list_artifacts(run_id, "eval/samples")}
    assert samples == {
        "eval/samples/local_cloze_shakespeare.jsonl",
        "eval/samples/local_ppl_shakespeare.jsonl",
    }
    local = client.download_artifacts(run_id, "eval/lm_eval_results.json")
    assert json.loads(Path(local).read_text())["live_model"]["bos_token"] == "eos"


def _one_sentence_exit(argv, capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def test_unknown_run_is_one_sentence(finished_run, capsys):
    runs_dir, _ = finished_run
    assert "is not a run" in _one_sentence_exit(["run=0123456789abcdef", f"runs_dir={runs_dir}"], capsys)
    assert "no MLflow store" in _one_sentence_exit(["run=abc", f"runs_dir={runs_dir / 'nowhere'}"], capsys)
    assert "run=" in _one_sentence_exit([f"runs_dir={runs_dir}"], capsys)
    assert "Unknown argument" in _one_sentence_exit(["run=abc", "colour=blue"], capsys)


def test_missing_checkpoint_is_one_sentence(finished_run, capsys, tmp_path):
    runs_dir, run_id = finished_run
    client = _client(runs_dir)
    checkpoint_dir = client.get_run(run_id).data.tags["checkpoint_dir"]
    client.set_tag(run_id, "checkpoint_dir", str(tmp_path / "gone"))
    try:
        assert "no checkpoint" in _one_sentence_exit([f"run={run_id}", f"runs_dir={runs_dir}"], capsys)
    finally:
        client.set_tag(run_id, "checkpoint_dir", checkpoint_dir)


def test_an_unknown_task_is_named_with_the_known_ones_before_the_hub(finished_run, capsys, monkeypatch):
    """It was reported as a hub problem ("the standard tasks bogus_task cannot load their data")."""
    runs_dir, run_id = finished_run
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = _one_sentence_exit([f"run={run_id}", f"runs_dir={runs_dir}", "tasks=bogus_task"], capsys)
    # Named from the words alone, before the store is read (the run's corpus is not known yet).
    assert "tasks=bogus_task names 'bogus_task', which is neither a local task (local, local_<kind>_<corpus>)" in err
    assert "standard tasks (the papers' suite: boolq, arc_easy" in err and "unreachable" not in err
    err = _one_sentence_exit([f"run={run_id}", f"runs_dir={runs_dir}", "tasks=boolq,arc_eazy"], capsys)
    assert "names 'arc_eazy', which" in err and "closest: arc_easy" in err and "'boolq'" not in err


def test_standard_tasks_offline_are_one_sentence(finished_run, capsys, monkeypatch):
    runs_dir, run_id = finished_run
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    err = _one_sentence_exit([f"run={run_id}", f"runs_dir={runs_dir}", "tasks=boolq,arc_easy"], capsys)
    assert "unreachable" in err and "local_cloze_shakespeare" in err
    assert not any(
        k.startswith("eval/") for k in _client(runs_dir).get_run(run_id).data.metrics if "boolq" in k
    )
