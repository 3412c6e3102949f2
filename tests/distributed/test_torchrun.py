"""One training over two ranks that torchrun started (CPU, gloo): each rank composes the config itself (no
Hydra folder), rank 0 alone opens the one MLflow run and writes checkpoints, the losses equal one
process's with the same global batch, and a paused run resumes exactly under torchrun."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from tests.helpers.runs import REPO, tiny_overrides
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config

pytestmark = pytest.mark.distributed

TORCHRUN = [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc_per_node=2"]
# The same global batch (2 ranks x 8 = 16) and the same 64 held-out windows: val_batches x batch_size windows
# in all, shared out among the ranks by Lightning's DistributedSampler (as the ddp_spawn test in test_train).
PER_RANK = {"data.batch_size": "8", "data.val_batches": "8", "trainer.num_threads": "1"}
ONE_PROCESS = {"data.batch_size": "16", "data.val_batches": "4", "trainer.num_threads": "1"}
KEYS = ("train/loss", "val/loss")
TOLERANCE = 1e-5  # fp32: the same sums, grouped differently across ranks


def torchrun(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    # Each rank's runs folder is its own, so that anything rank 1 wrote would show.
    overrides = tiny_overrides(tmp, steps=20, **PER_RANK, runs_dir=f"{tmp}/rank${{oc.env:RANK}}")
    proc = subprocess.run(
        [*TORCHRUN, "-m", "lit_modules.train", "trainer=ddp_torchrun", *overrides, *args],
        cwd=tmp, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=600,
    )
    return proc


def histories(client: MlflowClient, run_id: str) -> dict[str, list[tuple[int, float]]]:
    return {key: [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key), key=lambda m: m.step)]
            for key in KEYS}


def only_run(runs_dir: Path):
    client = MlflowClient(f"sqlite:///{runs_dir / 'mlflow.db'}")
    (single,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return client, single


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("torchrun")
    return tmp, torchrun(tmp)


def test_two_ranks_open_one_run_and_train_like_one_process(two_ranks, tmp_path: Path) -> None:
    tmp, proc = two_ranks
    assert proc.returncode == 0, proc.stderr[-3000:]
    client, ranked = only_run(tmp / "rank0")  # one MLflow run, opened by rank 0 ...
    assert not (tmp / "rank1").exists()  # ... while rank 1 made no store, checkpoint or folder at all
    assert sorted(p.name for p in (tmp / "rank0" / "checkpoints" / ranked.info.run_id).iterdir()) == [
        "config.json", "last.ckpt", "last.ckpt.sha256", "owner.lock"]  # one checkpoint, its checksum, its owner
    assert not any((tmp / name).exists() for name in ("outputs", "multirun", "rank0/hydra", "rank0/multirun"))
    assert ranked.info.status == "FINISHED" and ranked.data.params["trainer.devices"] == "2"
    assert proc.stdout.count(f"run {ranked.info.run_id} finished") == 1  # reported once, by rank 0

    before = torch.get_num_threads()
    try:
        single = run(compose_run_config(tiny_overrides(tmp_path, steps=20, **ONE_PROCESS)))
    finally:
        torch.set_num_threads(before)
    ranks_history = histories(client, ranked.info.run_id)
    single_history = histories(MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}"), single.run_id)
    for key in KEYS:
        assert [s for s, _ in ranks_history[key]] == [s for s, _ in single_history[key]] and ranks_history[key]
        for (step, ranked_value), (_, single_value) in zip(ranks_history[key], single_history[key]):
            assert ranked_value == pytest.approx(single_value, abs=TOLERANCE), (key, step)


def test_a_paused_run_resumes_exactly_under_torchrun(two_ranks, tmp_path: Path) -> None:
    tmp, full = two_ranks
    assert full.returncode == 0, full.stderr[-3000:]
    paused = torchrun(tmp_path, "trainer.stop_after_steps=10")
    assert paused.returncode == 0, paused.stderr[-3000:]
    client, first = only_run(tmp_path / "rank0")
    assert first.info.status == "KILLED"
    resumed = torchrun(tmp_path, f"resume={first.info.run_id}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    client, after = only_run(tmp_path / "rank0")  # the same run, continued
    assert after.info.run_id == first.info.run_id and after.info.status == "FINISHED"
    assert not (tmp_path / "rank1").exists()
    full_client, full_run = only_run(tmp / "rank0")
    assert histories(client, after.info.run_id) == histories(full_client, full_run.info.run_id)


def test_a_spawning_trainer_under_torchrun_is_one_sentence_per_rank(tmp_path: Path) -> None:
    proc = torchrun(tmp_path, "trainer.strategy=ddp_spawn")
    assert proc.returncode != 0
    sentence = ("error: trainer.strategy=ddp_spawn starts its own processes, but a launcher already started 2 ranks; "
                "use trainer=ddp_torchrun.")
    assert proc.stderr.count(sentence) == 2
    assert not (tmp_path / "rank0").exists() and not (tmp_path / "rank1").exists()
