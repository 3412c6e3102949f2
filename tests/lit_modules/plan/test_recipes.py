"""Every GPU recipe composes and is planned by a dry run on this CPU machine (an 8 x H100 node, DDP and FSDP),
and every paper's preset runs at a recipe's scale: its arms keep their techniques, the recipe sets the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from lit_modules.config import files
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated
from lit_modules.train import run
from sweeps.ablate import Grid, arm_words, read_grid, validate_cells
from sweeps.evidence.args import parse_args as parse_evidence_args
from sweeps.evidence.plan import check_all
from sweeps.evidence.protocol_file import load_spec

RECIPES = files.options("recipe")
# The plain presets (CPU-scale steps) and the evidence presets (CPU-scale TPP protocols); wd_plasticity's arms
# cap their steps for the CPU, so its uncapped twin wd_plasticity_full is the one that runs at GPU scale.
PRESETS = ("wisca", "small_init", "mols", "pc_layer", "wd_plasticity_full", "z_loss",
           "evidence/wisca", "evidence/small_init", "evidence/mols", "evidence/pc_layer", "evidence/wd_plasticity")


def test_there_is_one_recipe_per_gpu_size() -> None:
    assert RECIPES == ["gpt2_124m", "llama_1b", "llama_271m", "llama_350m"]
    for recipe in RECIPES:
        cfg = compose_run_config([f"recipe={recipe}"])
        assert cfg.model.name == recipe and 1024 <= cfg.data.seq_len <= 2048
        assert 250_000 <= cfg.trainer.global_batch_tokens <= 1_100_000
        assert (cfg.tokenizer.kind, cfg.trainer.precision, cfg.trainer.compile) == ("pretrained", "bf16-mixed", True)
        assert cfg.data.source == "hf" and cfg.data.name.startswith("fineweb_edu")
        header = files.option_path("recipe", recipe).read_text()
        assert "Source:" in header  # each file cites where its numbers come from


@pytest.mark.parametrize("recipe", RECIPES)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_a_dry_run_plans_each_recipe_on_an_8_gpu_node(recipe: str, strategy: str, runs_dir: Path, capsys) -> None:
    result = run(compose_run_config([f"recipe={recipe}", "trainer.devices=8", f"trainer.strategy={strategy}",
                                     "dry_run=true", f"runs_dir={runs_dir}"]))
    out = capsys.readouterr().out
    assert result.status == "DRY_RUN" and not runs_dir.exists()
    assert "on 8 x H100 (989 TFLOP/s dense bf16 each) at 40% MFU" in out and "GPU-hours" in out
    assert "MFU 40% is an assumption (plan.mfu" in out
    this_run = next(line for line in out.splitlines() if "<- this run" in line)
    assert ("fsdp full shard x 8" if strategy == "fsdp" else "ddp x 8") in this_run and "fits" in this_run
    assert out.count("fsdp full shard x 8") == 2 and out.count("ddp x 8") == 2  # with and without checkpointing
    assert "launch       torchrun --nproc_per_node=8" in out


@pytest.mark.parametrize("preset", PRESETS)
def test_every_paper_preset_composes_with_a_recipe(preset: str) -> None:
    """`make ablate EXP=<preset> ARGS="recipe=llama_271m trainer=gpu dry_run=true"`: every arm validates; an
    evidence preset's headline, as `sweeps.evidence papers=<paper> recipe=llama_271m` runs it, too."""
    overrides = ["recipe=llama_271m", "trainer=gpu", "dry_run=true"]
    if preset.startswith("evidence/"):
        # An evidence protocol's cells are rungs of the CPU ladder (`<arm>@l4`): at GPU scale the recipes are the
        # ladder, so each headline cell runs as its family arm at the recipe's size, as `sweeps.evidence
        # recipe=...` runs it and sweeps.gpu_cost prices it; every cell of that headline composes and validates.
        paper = preset.split("/")[1]
        headline = load_spec(paper).in_stages(["headline"]).at_recipe_size("llama_271m")
        check_all([headline], parse_evidence_args([f"papers={paper}", *overrides]))
        arm = headline.blocks[0].arms[0]
        words = [f"experiment={preset}", *headline.arm_words(arm)]
    else:
        grid = Grid(experiment=preset, arms=[], seeds=[], overrides=overrides)
        read_grid(grid)
        validate_cells(grid)
        words = [f"experiment={preset}", *arm_words(grid, grid.arms[0])]
    cfg = validated(compose_run_config([*words, *overrides])).config
    # An arm keeps its own tokenizer over the recipe, as it keeps its optimizer and regime (the `mols` preset's BPE
    # arms); a preset's tokenizer gives way to the recipe's (evidence/mols's CPU-scale BPE-1,024: at a recipe's size
    # the recipe's vocabulary has the noisy rare rows the claim needs).
    own = compose_run_config(words).tokenizer.kind
    wanted = own if own != "byte" and not preset.startswith("evidence/") else "pretrained"
    assert (cfg.model.name, cfg.data.seq_len, cfg.tokenizer.kind) == ("llama_271m", 2048, wanted)
    assert cfg.trainer.accumulate_grad_batches * 16 * 2048 == 524_288  # one GPU: the recipe's batch by accumulation
    assert cfg.trainer.max_steps is None and cfg.regime.name in ("tpp20", "tpp140", "tpp1.3", "tokens")  # no CPU cap
    assert cfg.ablation.arm  # the arm still names itself (and sets its technique)


def test_an_arm_keeps_its_own_optimizer_and_regime_over_the_recipe() -> None:
    muon = compose_run_config(["experiment=pc_layer", "+arm=pc_layer/muon_pc2", "recipe=llama_1b"])
    assert (muon.optim.name, muon.optim.lr, muon.optim.muon_lr) == ("muon", 2.0e-4, 1.0e-3)
    assert muon.techniques.pc_layer is not None
    # An evidence arm's own tokens per parameter (140, the paper's 1.3) hold at the recipe's size, counted on the
    # recipe's plain model (ladder_tokens), not on a CPU rung: GQA 8:1 has fewer weights of its own, so WISCA's
    # 1.3-TPP arm trains on more tokens per weight of its own, as on the ladder.
    from lit_modules.config.ladder import option_params_non_embedding

    for paper, arm, tpp in (("wd_plasticity", "tpp140_wd0.3", 140), ("wisca", "g8_origin@tpp1.3", 1.3)):
        checked = validated(compose_run_config([f"experiment=evidence/{paper}", *load_spec(paper).arm_words(arm),
                                                "recipe=gpt2_124m", "dry_run=true"]))
        assert checked.budget.requested_tokens == int(tpp * option_params_non_embedding("gpt2_124m")), arm
        if paper == "wd_plasticity":   # a plain-shaped arm: its own count is the plain one
            one_step = checked.budget.tokens_per_step / checked.budget.params_non_embedding
            assert tpp - one_step <= checked.budget.tokens_per_param <= tpp + 0.05, (arm, checked.budget)
        assert checked.config.model.name == "gpt2_124m"
        assert checked.config.tokenizer.kind == "pretrained"  # the preset's byte tokenizer gives way to the recipe's
        if paper == "wd_plasticity":
            assert (checked.config.schedule.name, checked.config.optim.weight_decay) == ("wsd", 0.3)


def test_the_command_line_still_wins_over_a_recipe() -> None:
    cfg = compose_run_config(["recipe=llama_350m", "regime=tpp140", "trainer=fsdp", "optim.lr=1e-4"])
    assert (cfg.regime.name, cfg.trainer.strategy, cfg.optim.lr) == ("tpp140", "fsdp", 1e-4)


def test_an_ablation_of_gpu_cells_runs_them_one_after_another() -> None:
    """16 local workers on one GPU would each load a 271M model onto it; workers= still asks for more."""
    from sweeps.ablate import launch_overrides

    grid = Grid(experiment="pc_layer", arms=["a", "b"], seeds=["0", "1"], overrides=["recipe=llama_271m"])
    assert launch_overrides(grid, None, gpu_cells=True) == []  # Hydra's basic launcher: one cell at a time
    grid.workers = 2
    assert launch_overrides(grid, None, gpu_cells=True)[:2] == ["hydra/launcher=local_parallel", "hydra.launcher.n_jobs=2"]
