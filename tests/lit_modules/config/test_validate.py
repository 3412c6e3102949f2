"""Every shipped config composes and validates; bad input is rejected with one sentence, before any run."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.runs import REPO, all_runs, tiny_overrides
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.train import run
from lit_modules.config.composition import compose_run_config

# sweep, finetune, evidence and ladder files have their own schemas (sweeps/sweep_config.py,
# config/finetune_recipe.py, sweeps/evidence.py, config/ladder.py: its rungs are model=ladder/<rung>).
GROUPS = sorted(p.name for p in (REPO / "conf").iterdir()
                if p.is_dir() and p.name not in ("sweep", "arm", "hydra", "finetune", "evidence", "ladder"))
# The GPU recipes select trainer=gpu (a dry run plans them here: tests/lit_modules/plan/test_recipes.py).
GPU_ONLY = {("trainer", "gpu"), ("trainer", "fsdp"), *(("recipe", p.stem) for p in (REPO / "conf/recipe").glob("*.yaml"))}
# Options that are templates for the user's own files: without them they must say what is missing.
NEEDS_USER_INPUT = {
    ("data", "text_files"): "lists no files",
    ("tokenizer", "pretrained"): "tokenizer.path is not set",
    ("tokenizer", "llama2"): "does not exist",  # the user's own Llama-2 tokenizer.json (docs/gpu.md)
    ("eval", "zero_shot"): "unreachable",  # the standard suites need the hub; tests are offline
    # LoRA adapts a trained model (init_from); WISCA on LoRA needs the adapters.
    **{("lora", v): "pass init_from=<run id or checkpoint>" for v in ("lora", "rslora", "pissa")},
    **{("wisca", v): "this run has none; add lora=lora" for v in ("lora_tensor", "lora_channel")},
    ("experiment", "mols_lora"): "pass init_from=<run id or checkpoint>",  # both arms carry adapters
}
# Presets that fine-tune a pre-trained base: their cells need init_from=<run id> (any id validates).
FINE_TUNING_PRESETS = ("lora", "wisca_lora", "mols_lora")


def group_options():
    for group in GROUPS:
        for path in sorted((REPO / "conf" / group).glob("*.yaml")):
            yield group, path.stem


@pytest.mark.parametrize("group,option", list(group_options()))
def test_every_config_composes_and_validates(group: str, option: str) -> None:
    # Hub corpora use long sequences; give the tiny model room so only the option under test matters.
    room = [] if group == "model" else ["model.max_seq_len=2048"]
    cfg = compose_run_config([f"{group}={option}", *room])
    if (group, option) in GPU_ONLY and not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="needs a CUDA device"):
            validate(cfg)
        return
    if (group, option) in NEEDS_USER_INPUT:
        with pytest.raises(ConfigError, match=NEEDS_USER_INPUT[(group, option)]):
            validate(cfg)
        return
    if group == "regime" and option == "steps":
        cfg = compose_run_config([f"{group}={option}", "trainer.max_steps=10", *room])
    validate(cfg)


def test_every_ablation_arm_composes() -> None:
    arms = sorted((REPO / "conf" / "arm").glob("*/*.yaml"))
    for arm in arms:
        experiment = arm.parent.name
        if not (REPO / "conf" / "experiment" / f"{experiment}.yaml").exists():
            continue
        base = [f"init_from={'0' * 32}"] if experiment in FINE_TUNING_PRESETS else []
        cfg = compose_run_config([f"experiment={experiment}", f"+arm={experiment}/{arm.stem}", *base])
        validate(cfg)
        assert cfg.ablation.arm, f"{arm} does not name its arm"


BAD = [
    (["model.d_model=66"], "divisible"),
    (["model.n_kv_heads=3"], "divisible"),
    (["init=gamma", "init.gamma=-1"], "gamma"),
    (["optim.name=sgd"], "optim.name must be one of"),
    (["optim.lr=0"], "learning rate must be positive"),
    (["schedule.name=linear"], "schedule.name must be one of"),
    (["regime=steps"], "no length"),
    (["regime=tokens", "regime.tokens=100"], "The token budget (100 tokens) is smaller than one optimizer step"),
    (["data.seq_len=512"], "exceeds model.max_seq_len"),
    (["optim.wd_exclude=embeddings"], "optim.wd_exclude must be one of"),
    (["regime.tokens=5000"], "not both"),
    (["trainer.stop_after_steps=100000"], "beyond the run"),
    (["tokenizer.kind=wordpiece"], "wordpiece"),
    (["diagnostics.names=[no_such_metric]"], "Unknown diagnostic"),
    (["data.source=hf"], "hf_path"),
    (["trainer.accumulate_grad_batches=0"], "at least 1"),
    (["optim.betas=[0.9,1.5]"], "betas"),
]
if not torch.cuda.is_available():
    BAD.append((["trainer=gpu"], "needs a CUDA device"))


@pytest.mark.parametrize("overrides,fragment", BAD)
def test_bad_config_rejected_before_any_run(overrides, fragment, runs_dir: Path) -> None:
    cfg = compose_run_config([f"runs_dir={runs_dir}", *overrides])
    with pytest.raises(ConfigError) as err:
        run(cfg)
    message = str(err.value)
    assert fragment in message, message
    assert all(line.strip().endswith((".", ")")) for line in message.splitlines()), message
    assert all_runs(runs_dir) == []
    assert not (runs_dir / "checkpoints").exists()


@pytest.mark.parametrize("override", ["model.d_model=wide", "optim.no_such_knob=1"])
def test_unknown_keys_and_wrong_types_rejected_at_composition(override: str) -> None:
    with pytest.raises(ConfigError) as err:
        compose_run_config([override])
    assert override.split("=")[0] in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("override,key", [("+no_such_key=1", "no_such_key"), ("+optim.momentum=0.9", "optim.momentum")])
def test_keys_forced_in_with_plus_are_rejected_by_validation(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=f"Unknown config key '{key}'"):
        validate(compose_run_config([override]))


def test_unknown_technique_key_is_a_config_error(runs_dir: Path, tmp_path: Path) -> None:
    cfg = compose_run_config([f"runs_dir={runs_dir}", "+techniques.bogus._target_=lit_modules.techniques.base.Technique",
                              "+techniques.bogus.strength=3"])
    with pytest.raises(ConfigError, match="Technique 'bogus' cannot be built"):
        validate(cfg)


def test_cli_bad_config_exits_2_with_one_line_and_no_run(runs_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lit_modules.train", "model.d_model=66", f"runs_dir={runs_dir}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "divisible" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert all_runs(runs_dir) == []


def test_cli_unknown_key_exits_nonzero_naming_the_key(runs_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "lit_modules.train", "+optim.momentum=0.9", f"runs_dir={runs_dir}"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert "momentum" in proc.stderr and "Traceback" not in proc.stderr
    assert all_runs(runs_dir) == []


def test_dry_run_prints_budget_and_opens_no_run(runs_dir: Path, capsys) -> None:
    result = run(compose_run_config([f"runs_dir={runs_dir}", "dry_run=true"]))
    out = capsys.readouterr().out
    assert result.status == "DRY_RUN" and result.run_id is None
    for word in ("parameters", "FLOPs/token", "budget", "steps", "ETA"):
        assert word in out
    assert result.budget.total_tokens == result.budget.steps * result.budget.tokens_per_step
    assert not runs_dir.exists()  # not even an empty MLflow store


def test_budget_matches_tokens_per_parameter() -> None:
    from lit_modules.config.budget import compute_budget

    cfg = validate(compose_run_config(["regime=tpp20"]))
    budget = compute_budget(cfg)
    assert budget.steps == 20 * budget.params_non_embedding // budget.tokens_per_step
    cfg = validate(compose_run_config(["regime=tpp140", "regime.param_count=total"]))
    budget = compute_budget(cfg)
    assert budget.steps == 140 * budget.params_total // budget.tokens_per_step
    capped = compute_budget(validate(compose_run_config(["regime=tpp140", "trainer.max_steps=7"])))
    assert capped.steps == 7
