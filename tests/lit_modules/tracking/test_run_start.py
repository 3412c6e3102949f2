"""run_start: a new run's experiment, tags, params and name; its start artifacts; and a finished twin under a parent."""

import json
import platform
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from lit_modules.config.budget import Budget
from lit_modules.config.composition import compose_run_config
from lit_modules.tracking.run_lifecycle import flatten, open_run
from lit_modules.tracking.run_start import finished_twin, log_start_artifacts, open_new_run
from lit_modules.tracking.store import get_or_create_experiment
from lit_modules.tracking.system_tags import describe_run
from tests.helpers.runs import tiny_overrides
from tests.helpers.stores import fresh_store

BUDGET = Budget(params_total=139_968, params_non_embedding=106_816, tokens_per_step=512, total_tokens=10_240,
                steps=20, warmup_steps=1, flops_per_token=836_736.0, tokens_per_param=0.0959)
HASH = "0123456789abcdef"
DIRTY = {"commit": "deadbeef", "dirty": True, "diff": "--- a/model.py\n+++ b/model.py\n+x = 2\n"}
INIT_STDS = {"embed": 0.02, "layers.0.attn.q_proj": 0.0123456789}
DATA = SimpleNamespace(fingerprint="fp-42")
FAKE_TECHNIQUE = SimpleNamespace(tags=lambda: {"technique.fake": "on"})


@pytest.fixture(scope="module")
def composed():
    return compose_run_config(tiny_overrides("unset", **{
        "ablation.name": "wisca", "ablation.arm": "arm1", "ablation.claim": "evidence/wisca", "+tags.team": "t1"}))


@pytest.fixture
def cfg(composed, tmp_path):
    cfg = composed.copy()
    cfg.runs_dir = str(tmp_path / "runs")
    return cfg


def open_new(client, cfg, config_hash=HASH, techniques=()):
    resolved = OmegaConf.to_container(cfg, resolve=True)
    return open_new_run(client, cfg, resolved, BUDGET, config_hash, DIRTY, DATA, list(techniques), INIT_STDS)


def test_a_new_run_carries_its_identity_provenance_and_system_tags(cfg, tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    run = client.get_run(open_new(client, cfg, techniques=[FAKE_TECHNIQUE]))
    assert run.info.status == "RUNNING" and run.info.run_name == "wisca/arm1/seed0"
    assert client.get_experiment(run.info.experiment_id).name == "runs"
    expected = {
        "seed": "0", "config_hash": HASH, "git_commit": "deadbeef", "git_dirty": "true", "data_fingerprint": "fp-42",
        "pkg.torch": metadata.version("torch"), "hw.python": platform.python_version(),
        "ablation.name": "wisca", "ablation.arm": "arm1", "ablation.claim": "evidence/wisca", "team": "t1",
        "init.emb": "same_rule", "init.head": "same_rule", "technique.fake": "on",
        "mlflow.source.git.commit": "deadbeef", "mlflow.source.type": "LOCAL",
        "mlflow.note.content": describe_run(cfg, BUDGET),
    }
    assert {k: run.data.tags.get(k) for k in expected} == expected
    assert "mlflow.parentRunId" not in run.data.tags


def test_a_new_run_records_every_config_value_the_budget_and_the_init_stds_as_params(cfg, tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    params = client.get_run(open_new(client, cfg)).data.params
    flat = flatten(OmegaConf.to_container(cfg, resolve=True))
    assert len(flat) > 100  # more than one MLflow batch
    assert {k: params[k] for k in flat} == flat
    assert params["model.d_model"] == "64" and params["trainer.max_steps"] == "20"
    assert {k: v for k, v in params.items() if k.startswith(("budget.", "init_std."))} == {
        "budget.params_total": "139968", "budget.params_non_embedding": "106816", "budget.tokens_per_step": "512",
        "budget.total_tokens": "10240", "budget.steps": "20", "budget.warmup_steps": "1",
        "budget.flops_per_token": "836736.0", "budget.tokens_per_param": "0.0959", "budget.requested_tokens": "None",
        "init_std.embed": "0.02", "init_std.layers.0.attn.q_proj": "0.0123457",
    }
    assert len(params) == len(flat) + 11


def test_a_child_goes_to_its_parents_experiment_and_an_unnamed_run_is_named_from_its_hash(cfg, tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    elsewhere = get_or_create_experiment(client, "renamed-grid", cfg.runs_dir)
    parent = open_run(client, elsewhere, "grid", {}, {})
    cfg.parent_run_id = parent
    cfg.ablation.name, cfg.ablation.arm = "", ""
    run = client.get_run(open_new(client, cfg))
    assert run.info.experiment_id == elsewhere and run.data.tags["mlflow.parentRunId"] == parent
    assert run.info.run_name == "tiny-0123456-seed0"
    assert client.get_experiment_by_name("runs") is None  # the configured experiment is not made for a child
    again = client.get_run(open_new(client, cfg))
    assert again.info.run_name == "tiny-0123456-seed0-2"


def test_opening_a_run_ends_a_dead_running_run_of_the_same_config_only(cfg, tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    experiment = get_or_create_experiment(client, "runs", cfg.runs_dir)
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    dead = {}
    for config_hash in (HASH, "fedcba9876543210"):  # folders made, never locked, an hour old: owners dead
        (tmp_path / config_hash).mkdir()
        tags = {"config_hash": config_hash, "checkpoint_dir": str(tmp_path / config_hash)}
        dead[config_hash] = client.create_run(experiment, start_time=an_hour_ago, tags=tags).info.run_id
    open_new(client, cfg)
    rerun_of, other = client.get_run(dead[HASH]), client.get_run(dead["fedcba9876543210"])
    assert rerun_of.info.status == "KILLED"
    assert rerun_of.data.tags["end_reason"] == (
        "its process died without ending the run (no live owner; found by a rerun of its config)")
    assert other.info.status == "RUNNING"


def start_artifacts(client, cfg, git, tmp_path) -> dict[str, str]:
    """The text of each file log_start_artifacts logged under `run/` of a new run, by name."""
    experiment = get_or_create_experiment(client, "runs", cfg.runs_dir)
    run_id = client.create_run(experiment).info.run_id
    log_start_artifacts(client, run_id, cfg, git, INIT_STDS)
    (tmp_path / "downloaded").mkdir()
    local = Path(client.download_artifacts(run_id, "run", str(tmp_path / "downloaded")))
    return {path.name: path.read_text() for path in local.iterdir()}


def test_start_artifacts_hold_the_masked_config_the_record_the_diff_and_the_stds(cfg, tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    cfg.logger.tracking_uri = "postgresql://alice:hunter2@db.example/mlflow"
    texts = start_artifacts(client, cfg, DIRTY, tmp_path)
    assert sorted(texts) == ["config.yaml", "git_diff.patch", "init_std.csv", "reproducibility.json"]
    assert "hunter2" not in texts["config.yaml"]
    assert OmegaConf.create(texts["config.yaml"]).logger.tracking_uri == "postgresql://alice:***@db.example/mlflow"
    record = json.loads(texts["reproducibility.json"])
    assert record["git"] == {"commit": "deadbeef", "dirty": True}  # the diff is its own file
    assert record["packages"]["torch"] == metadata.version("torch")
    assert record["hardware"]["python"] == platform.python_version()
    assert texts["git_diff.patch"] == DIRTY["diff"]
    assert texts["init_std.csv"].splitlines() == ["matrix,std", "embed,0.02", "layers.0.attn.q_proj,0.0123456789"]


def test_a_clean_tree_logs_no_diff(cfg, tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    texts = start_artifacts(client, cfg, {"commit": "deadbeef", "dirty": False, "diff": ""}, tmp_path)
    assert sorted(texts) == ["config.yaml", "init_std.csv", "reproducibility.json"]


def test_finished_twin_is_the_finished_child_of_the_same_parent_and_config(tmp_path) -> None:
    client = fresh_store(tmp_path / "runs")
    parent, other_parent = (open_run(client, "0", name, {}, {}) for name in ("grid", "other-grid"))

    def cell(under: str, config_hash: str, status: str) -> str:
        run_id = open_run(client, "0", None, {"config_hash": config_hash}, {}, parent_run_id=under)
        if status != "RUNNING":
            client.set_terminated(run_id, status=status)
        return run_id

    cell(parent, HASH, "RUNNING")
    cell(parent, HASH, "FAILED")
    cell(parent, "fedcba9876543210", "FINISHED")
    cell(other_parent, HASH, "FINISHED")
    assert finished_twin(client, parent, HASH) is None
    twin = cell(parent, HASH, "FINISHED")
    assert finished_twin(client, parent, HASH).info.run_id == twin
