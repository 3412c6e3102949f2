"""End-to-end runs on the CPU-tiny model: metrics, MLflow lifecycle, exact resume, multirun, DDP."""

import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest

from tests.helpers.runs import REPO, all_runs, mlflow_client, tiny_overrides
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config


def history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_tiny_run_logs_the_named_metrics_tags_and_config(runs_dir: Path) -> None:
    result = run(compose_run_config(tiny_overrides(runs_dir, steps=20, seed="3")))
    assert result.status == "FINISHED"
    client = mlflow_client(runs_dir)
    finished = client.get_run(result.run_id)
    assert finished.info.status == "FINISHED"
    metrics = set(finished.data.metrics)
    for key in ("train/loss", "val/loss", "val/bits_per_byte", "train/grad_norm", "tokens_seen",
                "tokens_per_s", "lr_mlp", "lr_emb", "lr_norm"):
        assert key in metrics, key
    # Initial stds are params and a table, not 16 step-0 charts ahead of the losses on the run page.
    assert not any(k.startswith("init/std/") for k in metrics)
    assert float(finished.data.params["init_std.tok_emb.weight"]) == pytest.approx(0.02, rel=0.1)
    tags = finished.data.tags
    assert tags["seed"] == "3" and len(tags["config_hash"]) == 16
    for key in ("git_commit", "git_dirty", "data_fingerprint", "pkg.torch", "pkg.lightning", "hw.platform"):
        assert key in tags
    params = finished.data.params
    assert params["model.d_model"] == "64" and params["optim.name"] == "adamw"
    artifacts = {a.path for a in client.list_artifacts(result.run_id, "run")}
    assert {"run/config.yaml", "run/reproducibility.json", "run/init_std.csv"} <= artifacts
    # MLflow's own fields, and a name that says what the run is (not a name drawn from the seeded RNG).
    assert tags["mlflow.source.git.commit"] == tags["git_commit"]
    assert tags["mlflow.source.name"]  # the entry point: pytest here, lit_modules/train.py from the CLI
    assert tags["mlflow.user"] and "seed 3" in tags["mlflow.note.content"]
    assert finished.info.run_name == f"tiny-{tags['config_hash'][:7]}-seed3"
    assert client.get_experiment(finished.info.experiment_id).name == "runs"
    assert [e.name for e in client.search_experiments()] == ["runs"]  # MLflow's empty `Default` is gone
    tokens = history(client, result.run_id, "tokens_seen")
    per_step = 8 * 64
    assert all(value == (step + 1) * per_step for step, value in tokens)
    assert Path(tags["checkpoint_dir"], "last.ckpt").is_file()
    # The learning rate follows warmup + cosine: it rises, then falls.
    lrs = [v for _, v in history(client, result.run_id, "lr_mlp")]
    assert max(lrs) > lrs[-1]


def test_seed_makes_runs_repeatable_and_distinct(runs_dir: Path) -> None:
    a = run(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="1")))
    b = run(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="1")))
    c = run(compose_run_config(tiny_overrides(runs_dir, steps=10, seed="2")))
    assert a.metrics["val/loss"] == b.metrics["val/loss"]
    assert a.metrics["val/loss"] != c.metrics["val/loss"]
    assert a.config_hash == b.config_hash != c.config_hash


def test_resume_is_exact_and_continues_the_same_run(runs_dir: Path) -> None:
    whole = run(compose_run_config(tiny_overrides(runs_dir, steps=40)))
    first = run(compose_run_config(tiny_overrides(runs_dir, steps=40, **{"trainer.stop_after_steps": "20"})))
    client = mlflow_client(runs_dir)
    assert first.status == "KILLED"
    assert client.get_run(first.run_id).info.status == "KILLED"
    second = run(compose_run_config(tiny_overrides(runs_dir, steps=40, resume=first.run_id)))
    assert second.run_id == first.run_id and second.status == "FINISHED"
    assert client.get_run(first.run_id).info.status == "FINISHED"
    assert len(all_runs(runs_dir)) == 2  # the uninterrupted run and the resumed one, no third
    assert abs(second.metrics["val/loss"] - whole.metrics["val/loss"]) < 1e-6
    last_whole = history(client, whole.run_id, "train/loss")[-1]
    last_resumed = history(client, first.run_id, "train/loss")[-1]
    assert last_whole[0] == last_resumed[0] == 39
    assert abs(last_whole[1] - last_resumed[1]) < 1e-6


def test_resume_refuses_a_changed_config(runs_dir: Path) -> None:
    from lit_modules.config.errors import ConfigError

    first = run(compose_run_config(tiny_overrides(runs_dir, steps=20, **{"trainer.stop_after_steps": "10"})))
    cfg = compose_run_config(tiny_overrides(runs_dir, steps=20, resume=first.run_id, **{"optim.lr": "0.1"}))
    with pytest.raises(ConfigError, match="optim.lr"):
        run(cfg, cli_overrides=["optim.lr=0.1", f"resume={first.run_id}"])
    with pytest.raises(ConfigError, match="neither a checkpoint file nor a known MLflow run"):
        run(compose_run_config(tiny_overrides(runs_dir, steps=20, resume="no-such-run")))


class Boom(L.Callback):
    def __init__(self, exc: BaseException):
        self.exc = exc

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == 3:
            raise self.exc


def test_crash_ends_failed_with_reason(runs_dir: Path) -> None:
    with pytest.raises(RuntimeError):
        run(compose_run_config(tiny_overrides(runs_dir, steps=10)), extra_callbacks=[Boom(RuntimeError("disk on fire"))])
    (only,) = all_runs(runs_dir)
    assert only.info.status == "FAILED"
    assert "disk on fire" in only.data.tags["end_reason"]


def test_interrupt_ends_killed(runs_dir: Path) -> None:
    with pytest.raises((KeyboardInterrupt, SystemExit)):
        run(compose_run_config(tiny_overrides(runs_dir, steps=10)), extra_callbacks=[Boom(KeyboardInterrupt())])
    (only,) = all_runs(runs_dir)
    assert only.info.status == "KILLED"


def test_diverging_loss_fails_the_run_with_its_reason(runs_dir: Path) -> None:
    from lit_modules.callbacks.divergence import DivergenceError

    cfg = compose_run_config(tiny_overrides(runs_dir, steps=30, **{"optim.lr": "50.0", "optim.grad_clip": "0",
                                                                  "trainer.divergence_factor": "1.5"}))
    with pytest.raises(DivergenceError):
        run(cfg)
    (only,) = all_runs(runs_dir)
    assert only.info.status == "FAILED" and "DivergenceError" in only.data.tags["end_reason"]


def test_hydra_multirun_runs_two_jobs(runs_dir: Path) -> None:
    args = [sys.executable, "-m", "lit_modules.train", "-m", "seed=0,1", *tiny_overrides(runs_dir, steps=5)]
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = all_runs(runs_dir)
    (parent,) = [r for r in runs if r.data.tags.get("multirun.role") == "parent"]
    jobs = [r for r in runs if r is not parent]
    assert sorted(r.data.tags["seed"] for r in jobs) == ["0", "1"]
    assert all(r.info.status == "FINISHED" for r in runs)
    # One command, one group in the UI: both jobs nest under the multirun's parent run.
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in jobs)
    assert parent.info.run_name.startswith("multirun/") and parent.data.params["jobs"] == "2"


def test_ddp_two_processes_match_one_process_with_the_same_global_batch(runs_dir: Path) -> None:
    # Same global batch (2 x 4 = 8) and the same held-out windows (val_batches x batch = 32 windows).
    single = run(compose_run_config(tiny_overrides(runs_dir, steps=10, **{"data.batch_size": "8", "data.val_batches": "4"})))
    ddp = run(compose_run_config(
        tiny_overrides(runs_dir, steps=10, trainer="ddp", **{"data.batch_size": "4", "data.val_batches": "8"})
    ))
    assert ddp.status == "FINISHED"
    assert len(all_runs(runs_dir)) == 2  # one MLflow run per training, not one per rank
    assert abs(single.metrics["val/loss"] - ddp.metrics["val/loss"]) < 1e-4


@pytest.mark.slow
def test_torch_compile_trains_like_eager(runs_dir: Path) -> None:
    eager = run(compose_run_config(tiny_overrides(runs_dir, steps=10)))
    compiled = run(compose_run_config(tiny_overrides(runs_dir, steps=10, **{"trainer.compile": "true"})))
    assert compiled.status == "FINISHED"
    assert abs(eager.metrics["val/loss"] - compiled.metrics["val/loss"]) < 1e-3
