"""The GPU planner against hand arithmetic (two recipes on an 8 x H100 node), and a plan that cannot fit its
GPU refused in one sentence (exit 2) that says what would make it fit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.memory import estimate_memory
from lit_modules.config.validate import validated
from lit_modules.plan.gpu_plan import plan_gpu_run
from lit_modules.train import run
from tests.helpers.runs import REPO

H100_PEAK, MFU, NODE = 989e12, 0.4, 8
V = 50_304  # the recipes' embedding rows: GPT-2's 50,257 ids (tokenizer=gpt2) padded to a multiple of 64


def planned(*overrides: str):
    checked = validated(compose_run_config([*overrides, f"trainer.devices={NODE}", "dry_run=true"]))
    return checked.config, checked.budget, plan_gpu_run(checked.config, checked.budget)


def test_gpt2_124m_on_8_h100_by_hand() -> None:
    cfg, budget, plan = planned("recipe=gpt2_124m")
    assert cfg.trainer.accumulate_grad_batches == 2  # 524,288 / (32 x 1024 x 8)
    assert budget.tokens_per_step == 32 * 1024 * 8 * 2 == 524_288
    assert budget.steps == (20 * 84_953_856) // 524_288 == 3_240
    assert budget.warmup_steps == 715 and budget.total_tokens == 3_240 * 524_288
    # FLOPs per token: 6 x 12 layers x (4 x 768^2 + 3 x 768 x 2048) + 6 x 768 x 50,304 + 12 x 12 x 12 x 64 x 1024
    fpt = 6 * 12 * (4 * 768**2 + 3 * 768 * 2048) + 6 * 768 * V + 12 * 12 * 12 * 64 * 1024
    assert budget.flops_per_token == fpt == 854_654_976
    assert plan.seconds == pytest.approx(fpt * 3_240 * 524_288 / (NODE * H100_PEAK * MFU))
    recompute = (6 * 12 * (4 * 768**2 + 3 * 768 * 2048) + 12 * 12 * 12 * 64 * 1024) / 3
    assert plan.seconds_checkpointed == pytest.approx((fpt + recompute) * 3_240 * 524_288 / (NODE * H100_PEAK * MFU))
    assert plan.gpu_hours == pytest.approx(plan.seconds * NODE / 3600)
    p = 162_220_800  # 84,953,856 + 2 x 50,304 x 768 (untied)
    ddp = estimate_memory(cfg, budget, layout="ddp", checkpointing=False)
    matrices = 12 * (4 * 768**2 + 3 * 768 * 2048) + 768 * V
    tokens, per_layer = 32 * 1024, 2 * 768 + 768 + 2 * 768 + 768 + 768 + 3 * 2048
    assert (ddp.weights, ddp.grads, ddp.optimizer) == (4 * p, 4 * p, 8 * p)
    assert ddp.working == 4 * p + 2 * matrices  # DDP's gradient buckets + autocast's bf16 matrices
    assert ddp.activations == tokens * (12 * per_layer * 2 + 8 * V)
    fsdp = estimate_memory(cfg, budget, layout="fsdp", checkpointing=True)
    assert (fsdp.weights, fsdp.grads, fsdp.optimizer) == (4 * p / 8, 4 * p / 8, 8 * p / 8)
    assert fsdp.working == 2 * (2 * 2 * V * 768 + 3 * 84_953_856 / 12)  # root unit + grads, 2 blocks + 1 grad
    assert fsdp.activations == tokens * (12 * 768 * 4 + per_layer * 2 + 8 * V)  # fp32 block inputs + 1 layer
    assert plan.chosen.layout == "ddp" and plan.fits(plan.chosen) and plan.refusal is None


def test_llama_1b_on_8_h100_by_hand() -> None:
    cfg, budget, plan = planned("recipe=llama_1b")
    assert cfg.trainer.accumulate_grad_batches == 8  # 1,048,576 / (8 x 2048 x 8)
    assert budget.tokens_per_step == 1_048_576
    assert budget.steps == (20 * 924_919_808) // 1_048_576 == 17_641 and budget.warmup_steps == 358
    p = 924_919_808 + 2 * 2048 * V  # untied
    m = plan.chosen.memory
    matrices = 18 * (4 * 2048**2 + 3 * 2048 * 5632) + 2048 * V
    per_layer = 2 * 2048 + 2048 + 2 * 2048 + 2048 + 2048 + 3 * 5632
    assert (m.weights, m.grads, m.optimizer, m.working) == (4 * p, 4 * p, 8 * p, 4 * p + 2 * matrices)
    assert m.activations == 8 * 2048 * (18 * per_layer * 2 + 8 * V)
    assert m.total == pytest.approx(46.28 * 2**30, rel=1e-3)  # fits the 71.7 GiB usable of an H100
    assert plan.fits(plan.chosen) and plan.usable == pytest.approx(0.9 * 81_559 * 2**20)


def test_the_global_batch_is_kept_on_one_gpu() -> None:
    cfg = validated(compose_run_config(["recipe=llama_1b", "trainer=gpu", "dry_run=true"])).config
    assert cfg.trainer.accumulate_grad_batches == 64  # 1,048,576 / (8 x 2048 x 1)


def test_a_plan_that_does_not_fit_is_refused_with_what_would_fit(runs_dir: Path, capsys) -> None:
    with pytest.raises(ConfigError) as err:
        run(compose_run_config(["recipe=llama_1b", "trainer.devices=8", "data.batch_size=16", "plan.gpu=a100_40gb",
                                "dry_run=true", f"runs_dir={runs_dir}"]))
    sentence = str(err.value)
    assert "\n" not in sentence and sentence.startswith("This plan does not fit: llama_1b")
    assert "~69.6 GiB per A100 40GB under ddp x 8" in sentence
    assert "trainer.strategy=fsdp and trainer.activation_checkpointing=true" in sentence
    assert "data.batch_size=4" in sentence  # the largest micro-batch that fits and divides the global batch
    assert "does not fit  <- this run" in capsys.readouterr().out  # the plan is printed first
    assert not runs_dir.exists()


def test_fsdp_is_not_offered_where_a_technique_refuses_it() -> None:
    _, _, plan = planned("experiment=pc_layer", "+arm=pc_layer/adamw_pc4", "recipe=llama_1b", "data.batch_size=64")
    assert all("PC layer" in p.refused for p in plan.placements if p.layout == "fsdp")
    assert "trainer.strategy=fsdp" not in plan.refusal and "data.batch_size=16" in plan.refusal


def test_the_refusal_is_one_line_and_exit_2_from_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "lit_modules.train", "dry_run=true", "recipe=llama_1b",
                           "trainer.devices=8", "data.batch_size=32", "plan.gpu=a100_40gb", f"runs_dir={tmp_path / 'r'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: This plan does not fit"), proc.stderr[-2000:]
    assert "A100 40GB" in lines[0] and "data.batch_size=4" in lines[0]
    assert "ETA" in proc.stdout and not (tmp_path / "r").exists()


def test_unknown_gpu_and_mfu_out_of_range_are_one_sentence() -> None:
    with pytest.raises(ConfigError, match="plan.gpu=v100 is not a GPU the planner knows; choose one of a100"):
        planned("recipe=gpt2_124m", "plan.gpu=v100")
    with pytest.raises(ConfigError, match=r"plan.mfu must be in \(0, 1\]"):
        planned("recipe=gpt2_124m", "plan.mfu=40")
