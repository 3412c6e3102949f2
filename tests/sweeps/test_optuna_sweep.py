"""Optuna sweeps: persistence, resume after a killed worker, failures, parallel workers, MLflow structure."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from tests.helpers.runs import REPO, all_runs, mlflow_client
from sweeps.optuna_sweep import main as sweep_main
from sweeps.space import parse_space, sample

FAST = ["trainer.max_steps=20", "trainer.val_every_n_steps=10", "data.seq_len=64", "data.batch_size=8",
        "data.val_batches=4"]


def sweep_args(runs_dir: Path, *extra: str) -> list[str]:
    return ["sweep=lr_wd", f"sweep.runs_dir={runs_dir}", "sweep.study_name=t", *FAST, *extra]


def study(runs_dir: Path) -> optuna.Study:
    return optuna.load_study(study_name="t", storage=f"sqlite:///{runs_dir.resolve() / 'optuna.db'}")


def states(runs_dir: Path) -> list[str]:
    return [t.state.name for t in study(runs_dir).trials]


def test_make_sweep_with_two_trials(runs_dir: Path) -> None:
    proc = subprocess.run(
        # runs_dir= as a user types it (as for make ablate): the study and every trial's run go there.
        ["make", "-s", "sweep", "SWEEP=lr_wd", "TRIALS=2", f"ARGS=runs_dir={runs_dir} sweep.study_name=t {' '.join(FAST)}"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert states(runs_dir).count("COMPLETE") == 2
    assert len(all_runs(runs_dir)) == 3  # the parent and its two trials
    assert "summary:" in proc.stdout and "mlflow-ui" in proc.stdout
    assert (runs_dir / "sweeps" / "t" / "summary.md").is_file()


def test_parent_child_structure_and_resume_counts_total_trials(runs_dir: Path) -> None:
    assert sweep_main(sweep_args(runs_dir, "sweep.n_trials=2")) == 0
    assert sweep_main(sweep_args(runs_dir, "sweep.n_trials=3")) == 0  # one more, not three more
    assert len(study(runs_dir).trials) == 3
    runs = all_runs(runs_dir)
    parents = [r for r in runs if r.data.tags.get("sweep.role") == "parent"]
    children = [r for r in runs if r.data.tags.get("sweep.role") == "trial"]
    assert len(parents) == 1 and len(children) == 3  # the rerun reattached to the same parent
    parent = parents[0]
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    assert sorted(c.data.tags["sweep.trial_number"] for c in children) == ["0", "1", "2"]
    assert all(c.data.tags["sweep.trial_state"] == "COMPLETE" for c in children)
    assert all("sweep.param.optim.lr" in c.data.tags for c in children)
    assert parent.info.status == "FINISHED" and "best_trial" in parent.data.tags
    artifacts = {a.path for a in mlflow_client(runs_dir).list_artifacts(parent.info.run_id, "summary")}
    assert {"summary/summary.json", "summary/trials.csv", "summary/optimization_history.png"} <= artifacts
    # The summary once (not again under report/), and the report also as HTML with its figures inside.
    report = {a.path for a in mlflow_client(runs_dir).list_artifacts(parent.info.run_id, "report")}
    assert {"report/report.md", "report/report.html"} <= report and "report/summary" not in report
    # Sampler and pruner settings are params of their own, like a run's config, not dataclass reprs.
    params = parent.data.params
    assert params["sweep.pruner.name"] == "median" and params["sweep.sampler.name"] == "tpe"
    assert not any("Config(" in v for v in params.values())


def test_a_diverging_trial_fails_with_its_reason_and_the_study_goes_on(runs_dir: Path, tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    # Grid over a sane and an absurd learning rate; the absurd one diverges.
    args = sweep_args(runs_dir, "sweep.n_trials=2", "sweep.sampler.name=grid", "sweep.pruner.name=none",
                      "optim.grad_clip=0", "trainer.divergence_factor=1.5")
    from sweeps import sweep_config

    original = sweep_config.SWEEP_DIR
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "lr_wd.yaml").write_text(
        "name: lr_wd\nstudy_name: t\noverrides: [model=tiny, regime=steps]\n"
        "space:\n  optim.lr: {type: categorical, choices: [1.0e+3, 3.0e-3]}\n"
    )
    sweep_config.SWEEP_DIR = tmp_path / "conf"
    try:
        assert sweep_main(args) == 0
    finally:
        sweep_config.SWEEP_DIR = original
    trials = study(runs_dir).trials
    failed = [t for t in trials if t.state.name == "FAIL"]
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(complete) == 1 and complete[0].params["optim.lr"] == 3e-3
    assert failed and "DivergenceError" in failed[0].user_attrs["reason"]
    child = mlflow_client(runs_dir).get_run(failed[0].user_attrs["mlflow_run_id"])
    assert child.info.status == "FAILED" and child.data.tags["sweep.trial_state"] == "FAIL"
    assert "DivergenceError" in child.data.tags["sweep.reason"]
    del space


def running_with_run_id(runs_dir: Path) -> bool:
    """A trial is RUNNING and has opened its MLflow run (what the rerun must find and close)."""
    try:
        return any(t.state.name == "RUNNING" and "mlflow_run_id" in t.user_attrs for t in study(runs_dir).trials)
    except Exception:  # noqa: BLE001 - the storage or study may not exist yet
        return False


@pytest.mark.slow  # 27 s; make test-slow (make test stays within its ~15 min)
def test_killed_worker_then_rerun_ends_with_exactly_the_configured_trials(runs_dir: Path) -> None:
    # The first worker's trial is far too long to finish, so it is certainly RUNNING when killed, however
    # slow or fast the machine is; the rerun uses the normal short trials.
    args = sweep_args(runs_dir, "sweep.n_trials=2", "sweep.heartbeat_interval=1", "sweep.grace_period=3",
                      "trainer.max_steps=1000000", "trainer.val_every_n_steps=100")
    proc = subprocess.Popen([sys.executable, "-m", "sweeps.optuna_sweep", *args], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline and not running_with_run_id(runs_dir):
        assert proc.poll() is None, "the sweep worker exited before it was killed"
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert "RUNNING" in states(runs_dir)
    time.sleep(4)  # past the grace period: the orphan is stale now
    assert sweep_main(sweep_args(runs_dir, "sweep.n_trials=2", "sweep.heartbeat_interval=1",
                                 "sweep.grace_period=3")) == 0
    final = states(runs_dir)
    assert final.count("COMPLETE") + final.count("PRUNED") == 2
    assert "RUNNING" not in final and final.count("FAIL") >= 1
    orphan = next(t for t in study(runs_dir).trials if t.state.name == "FAIL")
    assert mlflow_client(runs_dir).get_run(orphan.user_attrs["mlflow_run_id"]).info.status == "KILLED"


def test_two_workers_share_one_study_without_duplicates_or_overshoot(runs_dir: Path) -> None:
    assert sweep_main(sweep_args(runs_dir, "sweep.n_trials=4", "sweep.workers=2", "sweep.pruner.name=none")) == 0
    trials = study(runs_dir).trials
    assert [t.state.name for t in trials].count("COMPLETE") == 4 and len(trials) == 4
    assert len({t.number for t in trials}) == 4
    assert len({tuple(sorted(t.params.items())) for t in trials}) == 4


def test_conditional_parameters_are_never_sampled_when_inactive() -> None:
    specs = parse_space({
        "pc": {"type": "categorical", "choices": ["none", "pc"]},
        "techniques.pc_layer.level": {"type": "int", "low": 1, "high": 4, "when": {"pc": ["pc"]}},
        "optim.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    })
    s = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(40):
        trial = s.ask()
        sampled = sample(trial, specs)
        assert ("techniques.pc_layer.level" in sampled) == (sampled["pc"] == "pc")
        assert ("techniques.pc_layer.level" in trial.params) == (sampled["pc"] == "pc")
        s.tell(trial, 0.0)


def test_bad_sweep_config_is_one_sentence(runs_dir: Path, capsys) -> None:
    assert sweep_main(["sweep=no_such_space", f"sweep.runs_dir={runs_dir}"]) == 2
    assert "no sweep 'no_such_space'" in capsys.readouterr().err
    assert sweep_main(sweep_args(runs_dir, "model.d_model=66")) == 2
    assert not (runs_dir / "optuna.db").exists()


def test_default_technique_space_only_samples_valid_runs() -> None:
    """Every trial the default `make sweep` can draw composes and validates (no compute)."""
    from lit_modules.config.validate import validate
    from lit_modules.config.composition import compose_run_config
    from sweeps.space import as_overrides
    from sweeps.sweep_config import load_sweep_config

    cfg, specs = load_sweep_config("default", [])
    s = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    seen = set()
    for _ in range(25):
        trial = s.ask()
        sampled = sample(trial, specs)
        run_cfg = validate(compose_run_config([*cfg.overrides, *as_overrides(sampled)]))
        seen.update(k for k, v in (run_cfg.techniques or {}).items() if v is not None)
        s.tell(trial, 0.0)
    assert {"wisca", "pc_layer", "mols"} <= seen


def test_ablation_grid_run_twice_runs_each_cell_once(runs_dir: Path) -> None:
    from sweeps.ablate import main as ablate_main

    args = ["experiment=smoke", f"runs_dir={runs_dir}", "trainer.max_steps=10"]
    assert ablate_main(args) == 0
    assert ablate_main(args) == 0  # every cell is already FINISHED under the same parent: all skipped
    runs = all_runs(runs_dir)
    parents = [r for r in runs if r.data.tags.get("ablation.role") == "parent"]
    cells = [r for r in runs if r.data.tags.get("ablation.arm")]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert len(cells) == 4  # 2 arms x 2 seeds, each once
    assert sorted((c.data.tags["ablation.arm"], c.data.tags["seed"]) for c in cells) == [
        ("baseline", "0"), ("baseline", "1"), ("no_decay", "0"), ("no_decay", "1")]
    assert all(c.data.tags["mlflow.parentRunId"] == parents[0].info.run_id for c in cells)
    assert (Path(os.environ["LLM_REPORTS_DIR"]) / "smoke" / "report.md").is_file()

    # A store from before the experiment was renamed (its grid in `default`, not `runs`): one more seed for
    # one arm joins the same parent in the parent's experiment; nothing else reruns.
    client = mlflow_client(runs_dir)
    client.rename_experiment(parents[0].info.experiment_id, "default")
    assert ablate_main([*args, "arms=no_decay", "seeds=2"]) == 0
    runs = all_runs(runs_dir)
    cells = sorted((r.data.tags["ablation.arm"], r.data.tags["seed"]) for r in runs if r.data.tags.get("ablation.arm"))
    assert cells == [("baseline", "0"), ("baseline", "1"), ("no_decay", "0"), ("no_decay", "1"), ("no_decay", "2")]
    assert len([r for r in runs if r.data.tags.get("ablation.role") == "parent"]) == 1
    assert {r.info.experiment_id for r in runs} == {parents[0].info.experiment_id}


def test_ablation_arm_and_seed_selection_refuses_bad_input(runs_dir: Path, capsys) -> None:
    from sweeps.ablate import main as ablate_main

    base = ["experiment=smoke", f"runs_dir={runs_dir}"]
    for extra, sentence in ((["arms=nope"], "has no arm nope (its arms: baseline, no_decay)"),
                            (["seeds=a"], "must be comma-separated integers"),
                            (["+arm=smoke/baseline"], "use arms=<short names>")):
        assert ablate_main([*base, *extra]) == 2
        assert sentence in capsys.readouterr().err
    assert not all_runs(runs_dir)
