"""A protocol is one file: arms inline or extending conf/arm/, rungs by name (declared, or the ladder's), names
derived, cells handed to the ablation driver as data; each mistake in the file is one sentence."""

from __future__ import annotations

import pytest

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from sweeps.ablate import Grid, parse_args, read_grid
from sweeps.evidence import plan
from sweeps.evidence.args import EvidenceArgs
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.stages import run_stages
from tests.helpers.protocols import assert_refused_before_any_cell

ARMS = """rungs:
  x4: tiny_x4
  wide: {model: tiny_x4, overrides: [trainer.val_every_n_steps=7]}
arms:
  base: []
  trick:
    overrides: [optim.weight_decay=0.0]
    at: {x4: [optim.eps=1.0e-07]}
  kept: {extends: smoke/no_decay, overrides: [optim.eps=1.0e-06]}
"""


def test_a_cell_is_its_arm_its_rung_and_a_derived_name(protocol) -> None:
    spec = load_spec(protocol(ARMS + "blocks:\n  - {arms: [base, trick], seeds: [0, 1]}\n"
                              "  - {arms: [trick, kept], rung: x4, seeds: [2], stage: scale}\n"
                              "ablation_only: [trick@wide, kept]\n"))
    assert spec.blocks[1].arms == ("trick@x4", "kept@x4")  # `rung:` names every arm of the block at it
    assert spec.arm_words("base") == ["ablation.arm=base"]
    assert spec.arm_words("trick@x4") == ["optim.weight_decay=0.0", "model=tiny_x4", "optim.eps=1.0e-07",
                                          "ablation.arm=trick@x4"]
    assert spec.arm_words("trick@wide") == ["optim.weight_decay=0.0", "model=tiny_x4", "trainer.val_every_n_steps=7",
                                            "ablation.arm=trick@wide"]
    assert spec.arm_words("kept@x4")[:2] == ["+arm=smoke/no_decay", "optim.eps=1.0e-06"]
    assert spec.resolve("trick@l6") == ("trick", "l6")  # a ladder rung needs no line
    assert spec.family("trick@x4") == "trick" and spec.family("trick@lr3e-3") == "trick@lr3e-3"
    assert spec.ablate_names() == ["base", "trick", "trick@x4", "kept@x4", "trick@wide", "kept"]
    cfg = validate(compose_run_config(["experiment=smoke", *spec.arm_words("trick@x4")]))
    assert (cfg.model.name, cfg.optim.weight_decay, cfg.optim.eps, cfg.ablation.arm) == ("tiny_x4", 0.0, 1e-7, "trick@x4")
    assert validate(compose_run_config(["experiment=smoke", *spec.arm_words("kept")])).optim.weight_decay == 0.0


def test_the_documented_minimal_protocol_loads_and_dry_runs(protocol, tmp_path, capsys) -> None:
    """docs/evidence.md's first example, its trick and preset made real (smoke, no weight decay)."""
    from sweeps.evidence.driver import main
    from tests.helpers.runs import REPO

    page = (REPO / "docs" / "evidence.md").read_text()
    example = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    text = example.replace("preset: mytrick", "preset: smoke").replace("[mytrick=on]", "[optim.weight_decay=0.0]")
    assert text != example and "preset: smoke" in text
    paper = protocol("")
    (tmp_path / f"{paper}.yaml").write_text(text)
    spec = load_spec(paper)
    assert spec.blocks[1].arms == ("base@x4", "trick@x4") and spec.budgets == {"headline": 30.0}
    assert main([f"papers={paper}", "stages=headline,scale", "dry_run=true", f"runs_dir={tmp_path / 'runs'}"]) == 0
    assert "[odd] dry run: 20 cells and 12 tuning cells" in capsys.readouterr().out
    assert not (tmp_path / "runs").exists()


def test_a_ladder_rung_composes_as_the_ladder_model(protocol) -> None:
    spec = load_spec(protocol(ARMS + "blocks:\n  - {arms: [trick@l2], seeds: [0]}\n"))
    cfg = validate(compose_run_config(["experiment=smoke", *spec.arm_words("trick@l2")]))
    assert (cfg.model.name, cfg.model.n_layers, cfg.model.d_model, cfg.ablation.arm) == ("l2", 2, 32, "trick@l2")


def test_a_stage_hands_its_cells_to_the_launcher_as_data(protocol, tmp_path) -> None:
    spec = load_spec(protocol(ARMS + "blocks:\n  - {arms: [base, trick], seeds: [0, 1]}\n"
                              "  - {arms: [kept], seeds: [3]}\n"))
    launched = []
    args = EvidenceArgs(runs_dir=str(tmp_path / "runs"), overrides=["trainer.max_steps=2"], workers=2)
    assert run_stages(spec, args, lambda grids: launched.append(grids) or 0, {}, {}) == 0
    [grids] = launched  # one launch for the headline's cells, none for the empty stages
    assert all(isinstance(g, Grid) for g in grids)
    cells = {(a, s): tuple(g.arm_overrides[a]) for g in grids for a in g.arms for s in g.seeds}
    assert cells == {("base", "0"): ("ablation.arm=base",), ("base", "1"): ("ablation.arm=base",),
                     ("trick", "0"): ("optim.weight_decay=0.0", "ablation.arm=trick"),
                     ("trick", "1"): ("optim.weight_decay=0.0", "ablation.arm=trick"),
                     ("kept", "3"): ("+arm=smoke/no_decay", "optim.eps=1.0e-06", "ablation.arm=kept")}
    assert {g.experiment for g in grids} == {"smoke"} and all(g.overrides == args.overrides and g.workers == 2
                                                              for g in grids)


def test_make_ablate_of_an_evidence_preset_runs_the_protocols_cells() -> None:
    grid = parse_args(["experiment=evidence/wisca", "arms=g8_qk_vo_tensor@l2,g8_origin@tpp1.3@l3"])
    read_grid(grid)
    assert grid.arms == ["g8_qk_vo_tensor@l2", "g8_origin@tpp1.3@l3"] and grid.seeds == ["0", "1", "2", "3", "4"]
    # A variant arm (the 1.3-TPP condition) at a rung: its own overrides, then the rung's model.
    assert grid.arm_overrides["g8_origin@tpp1.3@l3"] == [
        "model.n_heads=8", "model.n_kv_heads=1", "regime=tokens", "regime.tokens='${ladder_tokens:${model.name},1.3}'",
        "data.batch_size=2", "model=ladder/l3", "ablation.arm=g8_origin@tpp1.3@l3"]
    # An arm at a rung: the rung's model and overrides, then the arm's own `at` that rung.
    words = grid.arm_overrides["g8_qk_vo_tensor@l2"]
    assert words.index("model=ladder/l2") < words.index("trainer.val_every_n_steps=20") \
        < words.index("techniques.wisca.every_n_steps=65")
    full = parse_args(["experiment=evidence/wisca"])
    read_grid(full)  # 6 arms at l4, 4 at l2, 6 at l3 and 6 at l6
    assert len(full.arms) == 22 and full.arms[:2] == ["g8_origin@l4", "g8_qk_vo_tensor@l4"]


def test_every_launch_grid_keeps_each_cells_config(protocol) -> None:
    spec = load_spec(protocol(ARMS + "blocks:\n  - {arms: [base, trick], seeds: [0, 1]}\n"))
    cells = plan.block_cells(spec, spec.blocks)
    with pytest.raises(ConfigError, match="the cell `base` would run with two configs"):
        plan.launch_grids(spec, [*cells, plan.Cell("base", 5, ("optim.lr=0.1",))], EvidenceArgs())


@pytest.mark.parametrize("text, sentence", [
    ("blocks:\n  - {arms: [nobody], seeds: [0]}\n",
     "conf/evidence/odd.yaml names `nobody`, which is neither one of its arms (baseline, no_decay"),
    (ARMS + "blocks:\n  - {arms: [trick@x9], seeds: [0]}\n", "nor `<arm>@<rung>` with one of its rungs (l2, l3"),
    ("arms: {trick: {overrides: [a=1], at: {x9: [b=2]}}}\nblocks:\n  - {arms: [trick], seeds: [0]}\n",
     "an arm's `at` names rung(s) x9, which `rungs` does not declare"),
    ("rungs: {x4: tiny_x4}\narms: {trick: [a=1], trick@x4: [b=2]}\nblocks:\n  - {arms: [trick], seeds: [0]}\n",
     "declares the arm `trick@x4`, which is `trick` at the rung x4; give its settings there under `trick`'s at"),
    ("arms: {trick: {extends: smoke/nothing}}\nblocks:\n  - {arms: [trick], seeds: [0]}\n",
     "arm `trick` extends 'smoke/nothing', which is not an arm file in conf/arm/"),
    ("rungs: {x9: tiny_x9}\nblocks:\n  - {arms: [baseline], seeds: [0]}\n", "rung `x9` runs model=tiny_x9, which is no model"),
    ("arms: {trick: optim.lr=1}\nblocks:\n  - {arms: [trick], seeds: [0]}\n",
     "arm `trick` is a list of Hydra overrides (key=value, group=option)"),
    ("arms: {trick: {overide: [a=1]}}\nblocks:\n  - {arms: [trick], seeds: [0]}\n",
     "arm `trick` has unknown key(s) overide (allowed: extends, overrides, at, rate_of, rate_factor)"),
    ("arms: {2x: []}\nblocks:\n  - {arms: [baseline], seeds: [0]}\n", "arm name '2x' must start with a letter"),
    ("budgets: {tail: 3}\nblocks:\n  - {arms: [baseline], seeds: [0]}\n", "budgets maps a stage (headline, below, scale)"),
    ("ablate_seeds: []\nblocks:\n  - {arms: [baseline], seeds: [0]}\n", "ablate_seeds is a non-empty list of integers"),
    ("blocks:\n  - {arms: [baseline], seeds: [0], rungs: x4}\n", "block 1 needs non-empty 'arms' and 'seeds' lists"),
])
def test_a_mistake_in_the_file_is_one_sentence_before_any_cell(protocol, tmp_path, capsys, text, sentence) -> None:
    assert_refused_before_any_cell(protocol(text), tmp_path, capsys, sentence)


@pytest.mark.parametrize("text, sentence", [
    ("preset: nowhere\nblocks:\n  - {arms: [baseline], seeds: [0]}\n",
     "conf/evidence/odd.yaml: There is no preset 'nowhere' in conf/experiment/"),
    ("preset: smoke\nblocks: [\n", "conf/evidence/odd.yaml is not a YAML file the driver can read"),
    ("- preset\n", "conf/evidence/odd.yaml is a mapping of preset, arms, rungs"),
])
def test_a_file_that_is_no_protocol_is_one_sentence(protocol, tmp_path, capsys, text, sentence) -> None:
    paper = protocol("")
    (tmp_path / f"{paper}.yaml").write_text(text)
    assert_refused_before_any_cell(paper, tmp_path, capsys, sentence)
