"""`python -m sweeps.evidence papers=... recipe=<size>`: the headline at a GPU recipe's size, where a rung arm (a
CPU-ladder model) runs as its family arm, and the CPU ladder's other stages are refused before any cell."""

import pytest

from lit_modules.config.errors import ConfigError
from sweeps.evidence.args import parse_args, recipe_named
from sweeps.evidence.driver import at_recipe, main
from sweeps.evidence.plan import check_all
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.spec import Arm, Block, EvidenceSpec, Rung

RUNGS = {r: Rung(r, f"ladder/{r}") for r in ("l2", "l3", "l4", "l6")}

AT_RECIPE = ["papers=wd_plasticity", "recipe=llama_271m", "trainer=gpu", "dry_run=true"]
OWN_DIRS = ["runs_dir=runs_271m", "results_dir=results_271m", "ledger=results_271m/RESULTS.md"]


def test_a_headline_rung_arm_runs_as_its_family_arm_with_its_checks_and_grid() -> None:
    headline = load_spec("wd_plasticity").in_stages(["headline"])
    at = headline.at_recipe_size("llama_271m")
    before = [a for b in headline.blocks for a in b.arms]
    assert "tpp140_wd0.3@l4" in before  # the protocol this test reads still holds a headline rung arm
    assert [a for b in at.blocks for a in b.arms] == [a.removesuffix("@l4") for a in before]
    assert [b.seeds for b in at.blocks] == [b.seeds for b in headline.blocks]
    assert [e["arm"] for e in at.checks["primary"]] == [e["arm"].removesuffix("@l4") for e in headline.checks["primary"]]
    assert at.finetune_lr_tuning.arms == tuple(a.removesuffix("@l4") for a in headline.finetune_lr_tuning.arms)
    assert at.finetune_lr_tuning.grid == headline.finetune_lr_tuning.grid
    # A primary's own reference cell goes with it (small init's share: the recipe against eps + gate alone).
    small = load_spec("small_init").in_stages(["headline"])
    [share] = [e for e in small.checks["primary"] if "reference" in e]
    assert share["reference"] == "baseline_eps_gate@l4"
    [mapped] = [e for e in small.at_recipe_size("llama_271m").checks["primary"] if "reference" in e]
    assert mapped == {**share, "arm": "small_eps_gate", "reference": "baseline_eps_gate"}


def test_the_mapped_headline_composes_at_the_recipe_and_the_unmapped_one_does_not() -> None:
    args = parse_args(AT_RECIPE)
    headline = load_spec("wd_plasticity").in_stages(["headline"])
    check_all([headline.at_recipe_size("llama_271m")], args)  # every cell composes and validates at llama_271m
    with pytest.raises(ConfigError, match="exceeds model.max_seq_len"):  # tiny_half's 256 under the recipe's 2048
        check_all([headline], args)


def test_variants_that_are_not_sizes_are_kept() -> None:
    headline = load_spec("wisca").in_stages(["headline"])
    mapped = [a for b in headline.at_recipe_size("gpt2_124m").blocks for a in b.arms]
    assert "g8_origin@tpp1.3@l4" in [a for b in headline.blocks for a in b.arms]
    # Only the rung goes: @tpp1.3 is the paper's budget, not a size.
    assert mapped == [a.removesuffix("@l4") for b in headline.blocks for a in b.arms]
    assert "g8_origin@tpp1.3" in mapped and "g8_qk_vo_tensor@tpp1.3" in mapped
    # A size rung under that condition is the condition's arm at the recipe's size; a variant after the rung is
    # no size, so that name stays.
    spec = EvidenceSpec("toy", "evidence/toy", (Block(("g8_origin@tpp1.3@l6", "g8_origin@l2@lr3e-3"), (0,)),),
                        arms={"g8_origin": Arm("g8_origin"), "g8_origin@tpp1.3": Arm("g8_origin@tpp1.3")}, rungs=RUNGS)
    assert spec.at_recipe_size("llama_1b").blocks[0].arms == ("g8_origin@tpp1.3", "g8_origin@l2@lr3e-3")


def test_a_rung_arm_and_its_family_arm_on_the_same_seed_are_refused() -> None:
    spec = EvidenceSpec("toy", "evidence/toy", (Block(("a", "a@l2"), (0, 1)),), arms={"a": Arm("a")}, rungs=RUNGS)
    with pytest.raises(ConfigError, match="would run `a` seed 0, `a` seed 1 twice"):
        spec.at_recipe_size("llama_1b")


def test_the_other_stages_are_refused_under_a_recipe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*AT_RECIPE, *OWN_DIRS, "stages=headline,below"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: stages=below run the CPU ladder's other model sizes")
    assert err.count("\n") == 1


def test_a_recipe_run_needs_a_store_results_and_ledger_of_its_own(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path) -> None:
    assert main([*AT_RECIPE, f"runs_dir={tmp_path / 'runs'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: recipe=llama_271m makes GPU-scale evidence: give it results_dir=, ledger= of its own")
    assert err.count("\n") == 1 and not (tmp_path / "runs").exists()
    specs = [load_spec("wd_plasticity").in_stages(["headline"])]
    [mapped] = at_recipe(specs, parse_args([*AT_RECIPE, *OWN_DIRS]))
    assert mapped == specs[0].at_recipe_size("llama_271m")
    assert at_recipe(specs, parse_args(["papers=wd_plasticity"])) == specs  # no recipe: as declared


@pytest.mark.parametrize(("overrides", "recipe"), [
    (["recipe=llama_1b"], "llama_1b"), (["seed=1", "+recipe=gpt2_124m"], "gpt2_124m"), (["recipe=null"], None),
    ([], None), (["trainer.recipe=x"], None), (["recipe=a", "recipe=b"], "b")])
def test_the_recipe_is_read_from_the_run_overrides(overrides: list[str], recipe: str | None) -> None:
    assert recipe_named(overrides) == recipe
