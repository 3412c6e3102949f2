"""The weight-decay plasticity pipeline: argument routing, the preset's grid, and the pipeline end to end on
the tiny model (the table's arithmetic: tests/analysis/test_plasticity.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from tests.helpers.runs import REPO, all_runs, mlflow_client
from lit_modules.config.budget import compute_budget
from lit_modules.config.validate import validate
from lit_modules.tracking.run_lifecycle import open_run
from lit_modules.tracking.store import get_or_create_experiment
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config
from sweeps.plasticity import main, parse_args

GRID = ["tpp20_wd0.1", "tpp20_wd0.3", "tpp20_wd0.5", "tpp20_wd1.0",
        "tpp140_wd0.1", "tpp140_wd0.3", "tpp140_wd0.5", "tpp140_wd1.0"]


def test_arguments_are_routed():
    args = parse_args(["runs_dir=/tmp/x", "seed=0", "finetune.steps=5", "probes=false", "pretrain=false",
                       "reports_dir=/tmp/r", "launcher=local_parallel"])
    assert args.runs_dir == "/tmp/x" and args.reports_dir == "/tmp/r" and args.experiment == "wd_plasticity"
    assert args.recipe_overrides == {"steps": "5"} and not args.probes and not args.pretrain
    assert args.grid_argv == ["runs_dir=/tmp/x", "seed=0", "launcher=local_parallel"]


def test_preset_grid_keeps_the_budget_ratio_and_logs_attention_rank():
    params = OmegaConf.load(REPO / "conf/experiment/wd_plasticity.yaml").hydra.sweeper.params
    assert params["+arm"].split(",") == [f"wd_plasticity/{a}" for a in GRID] and str(params.seed) == "0,1"
    steps = {}
    for arm in GRID + ["tpp20_wd3.0", "tpp140_wd3.0"]:
        cfg = validate(compose_run_config(["experiment=wd_plasticity", f"+arm=wd_plasticity/{arm}"]))
        regime, wd = arm.split("_wd")
        assert cfg.ablation.arm == arm and cfg.optim.weight_decay == float(wd) and cfg.regime.name == regime
        assert cfg.model.name == "tiny" and list(cfg.diagnostics.names) == ["attention_rank"]
        assert cfg.schedule.name == ("wsd" if regime == "tpp140" else "cosine")
        steps[regime] = compute_budget(cfg).steps
    assert steps == {"tpp20": 300, "tpp140": 2100}  # 20:140 = 1:7, capped below the uncapped budgets


def test_full_preset_is_the_same_grid_at_exactly_20_and_140_tokens_per_parameter():
    params = OmegaConf.load(REPO / "conf/experiment/wd_plasticity_full.yaml").hydra.sweeper.params
    assert params["+arm"].split(",") == [f"wd_plasticity_full/{a}" for a in GRID] and str(params.seed) == "0,1"
    for arm in GRID:
        capped = validate(compose_run_config(["experiment=wd_plasticity", f"+arm=wd_plasticity/{arm}"]))
        full = validate(compose_run_config(["experiment=wd_plasticity_full", f"+arm=wd_plasticity_full/{arm}"]))
        assert full.ablation.name == "wd_plasticity_full" and full.ablation.arm == arm
        budget = compute_budget(full)
        tokens_per_param = int(arm.split("_")[0].removeprefix("tpp"))
        # Whole steps of 512 tokens: the budget is the largest multiple below TPP x 106,816.
        assert budget.tokens_per_step * budget.steps <= tokens_per_param * 106_816 < budget.tokens_per_step * (budget.steps + 1)
        differing = {k for k in ("optim", "schedule", "regime", "model", "data", "diagnostics")
                     if OmegaConf.to_container(capped[k]) != OmegaConf.to_container(full[k])}
        assert not differing and capped.trainer.max_steps is not None and full.trainer.max_steps is None


def make_grid(runs_dir: Path, arms: list[str], steps: int = 8) -> str:
    """A grid parent with one FINISHED child per arm (seed 0), as sweeps.ablate would leave it."""
    client = mlflow_client(runs_dir)
    # The experiment the cells themselves go to, as sweeps.ablate opens its parent there.
    name = compose_run_config(["experiment=wd_plasticity"]).logger.experiment
    experiment = get_or_create_experiment(client, name, str(runs_dir))
    parent = open_run(client, experiment, "ablate:wd_plasticity",
                      {"ablation.name": "wd_plasticity", "ablation.role": "parent"}, {"arms": ",".join(arms)})
    for arm in arms:
        result = run(compose_run_config([
            "experiment=wd_plasticity", f"+arm=wd_plasticity/{arm}", "seed=0", f"parent_run_id={parent}",
            f"trainer.max_steps={steps}", "trainer.val_every_n_steps=4", "trainer.log_every_n_steps=2",
            f"runs_dir={runs_dir}",
        ]))
        assert result.status == "FINISHED"
    client.set_terminated(parent)
    return parent


def test_pipeline_fine_tunes_every_base_and_writes_the_table(tmp_path: Path, monkeypatch, capsys):
    runs_dir, reports = tmp_path / "runs", tmp_path / "reports"
    monkeypatch.setenv("LLM_REPORTS_DIR", str(reports))
    parent = make_grid(runs_dir, ["tpp20_wd0.1", "tpp20_wd1.0"])
    argv = ["pretrain=false", f"runs_dir={runs_dir}", f"reports_dir={reports}",
            "finetune.steps=6", "finetune.val_every_n_steps=3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "fine-tuning 2 of 2 base runs" in out
    table = reports / "wd_plasticity" / "plasticity"
    text = (table / "table.md").read_text()
    assert "| tpp20 | 0.1 | 1 |" in text and "| tpp20 | 1 | 1 |" in text
    assert "## Is the best-loss lambda the most plastic one?" in text
    assert "seed spread is unknown" in text or "no decoupling seen" in text  # one seed: never a claim
    per_run = pd.read_csv(table / "runs.csv")
    assert len(per_run) == 2 and per_run["plasticity"].notna().all()
    assert (per_run["plasticity"] - (per_run["target_before"] - per_run["target_after"])).abs().max() < 1e-9
    assert per_run["qk_pseudo_rank"].between(1, 16).all()
    runs = all_runs(runs_dir)
    finetunes = [r for r in runs if "finetune.base_run_id" in r.data.tags]
    bases = {r.info.run_id for r in runs if r.data.tags.get("mlflow.parentRunId") == parent}
    assert len(finetunes) == 2 and {r.data.tags["finetune.base_run_id"] for r in finetunes} == bases
    assert all(r.data.tags["finetune.grid_parent_run_id"] == parent for r in finetunes)
    assert all(r.data.tags["finetune.base_arm"] in ("tpp20_wd0.1", "tpp20_wd1.0") for r in finetunes)
    # A rerun fine-tunes nothing new; other recipe values are another fine-tune, not a stale match.
    assert main([*argv, "probes=false"]) == 0
    assert "fine-tuning 0 of 2 base runs" in capsys.readouterr().out
    assert len([r for r in all_runs(runs_dir) if "finetune.base_run_id" in r.data.tags]) == 2
    assert main([*argv, "probes=false", "finetune.steps=2"]) == 0
    assert "fine-tuning 2 of 2 base runs" in capsys.readouterr().out


def test_missing_grid_and_bad_preset_are_one_sentence(tmp_path: Path, capsys):
    assert main(["pretrain=false", f"runs_dir={tmp_path / 'runs'}"]) == 2
    assert "no pre-training grid of 'wd_plasticity'" in capsys.readouterr().err
    assert main(["experiment=nope", f"runs_dir={tmp_path / 'runs'}"]) == 2
    assert "There is no preset 'nope'" in capsys.readouterr().err
    assert main(["finetune=nope"]) == 2
    assert "no fine-tuning recipe 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_one_command_runs_grid_finetunes_and_table(tmp_path: Path, monkeypatch):
    """The real command: sweeps.ablate's multirun over the preset's 8 arms (seed 0, a few steps each)."""
    runs_dir, reports = tmp_path / "runs", tmp_path / "reports"
    monkeypatch.setenv("LLM_REPORTS_DIR", str(reports))
    argv = [f"runs_dir={runs_dir}", f"reports_dir={reports}", "seed=0", "trainer.max_steps=6",
            "trainer.val_every_n_steps=3", "finetune.steps=4", "finetune.val_every_n_steps=2", "probes=false"]
    assert main(argv) == 0
    per_run = pd.read_csv(reports / "wd_plasticity" / "plasticity" / "runs.csv")
    assert sorted(per_run["arm"]) == sorted(GRID) and per_run["plasticity"].notna().all()
    summary = pd.read_csv(reports / "wd_plasticity" / "plasticity" / "summary.csv")
    assert len(summary) == 8 and set(summary["regime"]) == {"tpp20", "tpp140"}
    assert (reports / "wd_plasticity" / "report.md").is_file()
    # Rerun: every cell and every fine-tune is already done.
    before = len(all_runs(runs_dir))
    assert main(argv) == 0
    assert len(all_runs(runs_dir)) == before
