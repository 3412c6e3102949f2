"""The weight-decay plasticity pipeline: table arithmetic and the decoupling statement on known numbers,
argument routing, the preset's grid, and the pipeline end to end on the tiny model."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from conftest import REPO, all_runs, mlflow_client
from lit_modules.config.budget import compute_budget
from lit_modules.config.validate import validate
from lit_modules.tracking.run_lifecycle import open_run
from lit_modules.tracking.store import get_or_create_experiment
from lit_modules.train import run
from sweeps.compose import compose_run_config
from analysis.plasticity import decoupling, summarize
from sweeps.plasticity import main, parse_args

GRID = ["tpp20_wd0.1", "tpp20_wd0.3", "tpp20_wd0.5", "tpp20_wd1.0",
        "tpp140_wd0.1", "tpp140_wd0.3", "tpp140_wd0.5", "tpp140_wd1.0"]


def rows(cells: dict[float, list[tuple[float, float]]], regime: str = "tpp20") -> pd.DataFrame:
    """{lambda: [(base val loss, plasticity) per seed]} -> the per-run frame the table aggregates."""
    out = []
    for wd, seeds in cells.items():
        for seed, (loss, plastic) in enumerate(seeds):
            out.append({"regime": regime, "weight_decay": wd, "seed": str(seed), "tokens": 100.0,
                        "base_val_loss": loss, "plasticity": plastic, "target_before": 3.0,
                        "target_after": 3.0 - plastic, "train_val_gap": 0.1, "qk_pseudo_rank": 16.0,
                        "ov_pseudo_rank": 15.0, "probe_best_acc": float("nan")})
    return pd.DataFrame(out)


def test_summary_is_mean_and_sample_sd_over_seeds():
    s = summarize(rows({0.1: [(2.0, 0.1), (2.2, 0.3)], 1.0: [(2.5, 0.5)]}))
    first = s[s["weight_decay"] == 0.1].iloc[0]
    assert first["n_seeds"] == 2
    assert first["base_val_loss_mean"] == pytest.approx(2.1)
    assert first["base_val_loss_sd"] == pytest.approx(0.1414213562)  # sample sd of 2.0, 2.2
    assert first["target_after_mean"] == pytest.approx(2.8)
    assert pd.isna(s[s["weight_decay"] == 1.0].iloc[0]["plasticity_sd"])  # one seed: no sd
    assert pd.isna(first["probe_best_acc_mean"])


def test_decoupling_statements_on_known_numbers():
    # rows(): target loss after = 3.0 - plasticity, so "most plastic" and "lowest loss after" coincide here.
    separated = decoupling(summarize(rows({0.1: [(2.00, 0.10), (2.01, 0.11)], 1.0: [(2.10, 0.30), (2.11, 0.31)]})))
    assert len(separated) == 2  # one line per downstream measure
    assert "lambda 0.1 has the lowest base val/loss, lambda 1 the most plasticity" in separated[0]
    assert "they DIFFER" in separated[0] and "base loss +0.1000, plasticity +0.2000" in separated[0]
    assert "do not overlap" in separated[0] and "a small-n observation" in separated[0]
    assert "lambda 1 the lowest target loss after" in separated[1] and "target_after -0.2000" in separated[1]
    # Paired by seed: seed s of lambda 1.0 minus seed s of lambda 0.1. Base loss +0.10, +0.10, +0.10 (sd 0)
    # is not testable by t; with a spread, both shifts consistent across 3 seeds are significant.
    cells = {0.1: [(2.00, 0.10), (2.02, 0.12), (2.04, 0.11)], 1.0: [(2.10, 0.30), (2.13, 0.33), (2.14, 0.31)]}
    paired = decoupling(summarize(rows(cells)), rows(cells))
    assert "Paired by seed (n = 3), lambda 1 - lambda 0.1: base_val_loss +0.1033" in paired[0]
    assert "both differences are significant" in paired[0] and "decoupling at this scale" in paired[0]
    cells[1.0][2] = (2.03, 0.05)  # one seed reverses both: neither difference is significant any more
    assert "not both significant" in decoupling(summarize(rows(cells)), rows(cells))[0]
    noisy = decoupling(summarize(rows({0.1: [(2.00, 0.10), (2.20, 0.40)], 1.0: [(2.10, 0.30), (2.11, 0.31)]})))
    assert "within seed noise: not evidence of decoupling" in noisy[0]
    same = decoupling(summarize(rows({0.1: [(2.0, 0.5)], 1.0: [(2.1, 0.3)]})))
    assert "same lambda (0.1)" in same[0] and "no decoupling seen" in same[0]
    single = decoupling(summarize(rows({0.1: [(2.0, 0.1)], 1.0: [(2.1, 0.3)]})))
    assert "seed spread is unknown" in single[0]
    lonely = decoupling(summarize(rows({0.1: [(2.0, 0.1)]})))
    assert "fewer than two lambdas" in lonely[0]
    two_regimes = pd.concat([rows({0.1: [(2.0, 0.1)], 1.0: [(2.1, 0.3)]}, "tpp20"),
                             rows({0.1: [(1.9, 0.3)], 1.0: [(2.0, 0.1)]}, "tpp140")])
    lines = decoupling(summarize(two_regimes))
    assert [line.split(":")[0] for line in lines] == ["- tpp140"] * 2 + ["- tpp20"] * 2
    assert "same lambda (0.1)" in lines[0] and "they DIFFER" in lines[2]


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
    experiment = get_or_create_experiment(client, "default", str(runs_dir))
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
