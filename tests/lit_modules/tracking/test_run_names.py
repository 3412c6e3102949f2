"""Run names: what the run is, and unique within an experiment (seeded RNGs once made them collide)."""

from pathlib import Path

from mlflow.tracking import MlflowClient

from lit_modules.config.composition import compose_run_config
from lit_modules.tracking.run_names import base_run_name, unique_run_name
from lit_modules.tracking.store import get_or_create_experiment, tracking_uri
from lit_modules.train import run
from tests.helpers.runs import all_runs, tiny_overrides


def test_a_cell_is_named_by_preset_arm_and_seed_and_other_runs_by_model_hash_and_seed() -> None:
    cell = compose_run_config(["experiment=pc_layer", "+arm=pc_layer/adamw_pc4", "seed=2"])
    assert base_run_name(cell, "0123456789abcdef") == "pc_layer/adamw_pc4/seed2"
    single = compose_run_config(["seed=5"])
    assert base_run_name(single, "0123456789abcdef") == "tiny-0123456-seed5"
    named = compose_run_config(["logger.run_name=mine"])
    assert base_run_name(named, "0123456789abcdef") == "mine"


def test_a_taken_name_gets_the_next_free_suffix(tmp_path: Path) -> None:
    client = MlflowClient(tracking_uri(None, str(tmp_path)))
    exp = get_or_create_experiment(client, "runs", str(tmp_path))
    assert unique_run_name(client, exp, "wisca/qk/seed0") == "wisca/qk/seed0"
    client.create_run(exp, run_name="wisca/qk/seed0")
    client.create_run(exp, run_name="wisca/qk/seed0_other")  # a longer name with the same start is no clash
    assert unique_run_name(client, exp, "wisca/qk/seed0") == "wisca/qk/seed0-2"
    client.create_run(exp, run_name="wisca/qk/seed0-2")
    assert unique_run_name(client, exp, "wisca/qk/seed0") == "wisca/qk/seed0-3"
    other = get_or_create_experiment(client, "sweeps", str(tmp_path))
    assert unique_run_name(client, other, "wisca/qk/seed0") == "wisca/qk/seed0"  # per experiment


def test_runs_of_two_seeds_and_a_rerun_have_three_different_names(runs_dir: Path) -> None:
    """Before: both seeds of every arm drew MLflow's random name right after seed_everything seeded it."""
    for seed in ("0", "1", "0"):
        run(compose_run_config(tiny_overrides(runs_dir, steps=2, seed=seed, **{"trainer.val_every_n_steps": "2"})))
    names = [r.info.run_name for r in sorted(all_runs(runs_dir), key=lambda r: r.info.start_time)]
    assert len(set(names)) == 3
    assert names[0].endswith("-seed0") and names[1].endswith("-seed1") and names[2] == names[0] + "-2"
