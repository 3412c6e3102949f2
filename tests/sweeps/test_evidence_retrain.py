"""A base restored from the committed export has no checkpoint: before a fine-tune starts from it, it leaves the
grid and its cell is trained again (sweeps/evidence/retrain.py); a cell that does not finish again is put back,
so no export loses what the last one held."""

import json
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.ablation import assemble
from analysis.results_data import read_results_data, write_results_data
from lit_modules.runs import tags
from lit_modules.runs.search import ABLATION, find_parent
from lit_modules.tracking.store import tracking_uri
from sweeps.ablate import finished_hashes
from sweeps.evidence.restore import restore_export
from sweeps.evidence.retrain import restored, retrain

REPO = Path(__file__).resolve().parents[2]
CHECKS = "c" * 64


def _restored_grid(tmp_path: Path) -> tuple[MlflowClient, str, list]:
    """wd_plasticity's committed tpp20_wd0.1 runs and their fine-tunes, restored into a fresh store: (client,
    grid parent id, the restored FINISHED bases that have fine-tunes)."""
    ab = read_results_data(REPO / "results" / "wd_plasticity")
    runs = ab.runs[ab.runs["arm"] == "tpp20_wd0.1"]
    ids = set(runs["run_id"])
    write_results_data(assemble(ab.parent, runs.drop(columns=["arm", "seed"]), ab.curves[ab.curves["run_id"].isin(ids)],
                                ab.finetunes[ab.finetunes[f"tags.{tags.FINETUNE_BASE}"].isin(ids)],
                                ab.token_gaps.iloc[:0], []), tmp_path / "export")
    (tmp_path / "export" / "provenance.json").write_text(json.dumps({"checks_sha256": CHECKS}))
    runs_dir = str(tmp_path / "runs")
    preset = ab.parent.tags[tags.ABLATION_NAME]
    assert restore_export(preset, runs_dir, tmp_path / "export", CHECKS, experiment="runs") is not None
    client = MlflowClient(tracking_uri(None, runs_dir))
    parent = find_parent(client, preset, kinds=(ABLATION,))
    children = client.search_runs([parent.info.experiment_id], max_results=10_000,
                                  filter_string=f"tags.`{tags.PARENT}` = '{parent.info.run_id}' and attributes.status = 'FINISHED'")
    bases = [r for r in restored(children) if client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.`{tags.FINETUNE_BASE}` = '{r.info.run_id}'")]
    assert len(bases) >= 2
    return client, parent.info.run_id, bases


def _stage(client: MlflowClient, run) -> str:
    return client.get_run(run.info.run_id).info.lifecycle_stage


def _finetunes_of(client: MlflowClient, run) -> list:
    from mlflow.entities import ViewType

    return client.search_runs([run.info.experiment_id], run_view_type=ViewType.ALL,
                              filter_string=f"tags.`{tags.FINETUNE_BASE}` = '{run.info.run_id}'")


def test_a_retrained_base_leaves_the_grid_with_its_fine_tunes_and_one_not_trained_again_comes_back(tmp_path: Path) -> None:
    client, parent, (first, second, *_) = _restored_grid(tmp_path)
    hashes = finished_hashes(client, parent)

    def relaunch() -> int:  # the launch: the first base's cell finishes again, the second's fails
        for base in (first, second):
            assert _stage(client, base) == "deleted"  # out of the grid: its cell is not found finished
        assert finished_hashes(client, parent) == hashes - {first.data.tags[tags.CONFIG_HASH],
                                                            second.data.tags[tags.CONFIG_HASH]}
        again = client.create_run(first.info.experiment_id, tags={
            tags.PARENT: parent, tags.CONFIG_HASH: first.data.tags[tags.CONFIG_HASH]})
        client.set_terminated(again.info.run_id, "FINISHED")
        return 1

    assert retrain(client, [first, second], relaunch, "test bases") == 1
    assert _stage(client, first) == "deleted" and {_stage(client, f) for f in _finetunes_of(client, first)} == {"deleted"}
    assert _stage(client, second) == "active" and {_stage(client, f) for f in _finetunes_of(client, second)} == {"active"}
    assert finished_hashes(client, parent) == hashes  # every cell finished once: the new run, or the one put back

    def stopped() -> int:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        retrain(client, [second], stopped, "test bases")
    assert _stage(client, second) == "active" and {_stage(client, f) for f in _finetunes_of(client, second)} == {"active"}
    assert retrain(client, [], stopped, "test bases") == 0  # nothing restored: nothing launched


@pytest.mark.slow  # ~2 min: two evidence calls with fine-tunes and scoring
def test_a_base_restored_without_its_fine_tune_is_trained_again_and_fine_tuned(tmp_path: Path, monkeypatch) -> None:
    """Call 1 pre-trains, fine-tunes and scores a tiny protocol; its export loses one fine-tune (as if the
    session had stopped before it). On a fresh store the next call restores the export, trains that one base
    again (to the same loss: the cell is deterministic), fine-tunes and scores it; the other bases stay restored."""
    from sweeps.evidence import protocol_file
    from sweeps.evidence.driver import main

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "smoke.yaml").write_text("preset: smoke\nfinetune: python_docs\nfinetune_eval: [local]\nblocks:\n"
                                      "  - {arms: [baseline, no_decay], seeds: [0]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", specs)
    folder = tmp_path / "results" / "smoke"
    argv = ["papers=smoke", f"results_dir={tmp_path / 'results'}", f"ledger={tmp_path / 'RESULTS.md'}",
            "trainer.max_steps=6", "finetune.steps=4", "eval.local_items=10", "workers=1"]
    assert main([*argv, f"runs_dir={tmp_path / 'runs1'}"]) == 0
    runs = pd.read_csv(folder / "data" / "runs.csv")
    tunes = pd.read_csv(folder / "data" / "finetune_runs.csv")
    assert len(runs) == 2 and len(tunes) == 2
    lost = runs.loc[runs["arm"] == "no_decay"].iloc[0]
    tunes[tunes[f"tags.{tags.FINETUNE_BASE}"] != lost["run_id"]].to_csv(folder / "data" / "finetune_runs.csv", index=False)

    store = tmp_path / "runs2"
    assert main([*argv, f"runs_dir={store}"]) == 0
    client = MlflowClient(tracking_uri(None, str(store)))
    children = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
                if tags.ABLATION_ARM in r.data.tags and tags.FINETUNE_BASE not in r.data.tags]
    trained = [r for r in children if tags.RESTORED_FROM not in r.data.tags]
    assert [r.data.tags[tags.ABLATION_ARM] for r in trained] == ["no_decay"] and len(children) == 2
    assert trained[0].data.metrics["val/loss"] == lost["metrics.val/loss"]
    again = pd.read_csv(folder / "data" / "finetune_runs.csv")
    assert len(again) == 2 and (again["tags.finetune.eval_tasks"] == "local").all()
    assert set(again[f"tags.{tags.FINETUNE_BASE}"]) == set(pd.read_csv(folder / "data" / "runs.csv")["run_id"])
