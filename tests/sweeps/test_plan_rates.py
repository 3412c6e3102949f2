"""Where a protocol's tuned rates reach beyond its test cells: a fine-tune tuning base pre-trains at its arm's tuned
rate, a grid's tuning cells include the rates it may grow to, and a recipe maps every cell a check names."""

from __future__ import annotations

from sweeps.evidence import plan
from sweeps.evidence.protocol_file import load_spec

PROTOCOL = """arms:
  ref: [optim.weight_decay=0.1]
  wd: [optim.weight_decay=0.5]
blocks:
  - {arms: [ref, wd], rung: l4, seeds: [0, 1]}
lr_tuning:
  - {arms: [ref@l4, wd@l4], grid: [2.0e-3, 4.0e-3], tuning_seeds: [100], tiebreak_seeds: [102], extend: 1}
finetune: python_docs
finetune_lr_tuning: {arms: [ref@l4, wd@l4], grid: [1.0e-3, 3.0e-3], tuning_seeds: [101]}
"""


def _lr(cell: plan.Cell) -> str | None:
    words = [w for w in cell.words if w.startswith("optim.lr=")]
    return words[-1].split("=", 1)[1] if words else None


def test_a_fine_tune_tuning_base_pre_trains_at_its_arms_tuned_rate(protocol) -> None:
    spec = load_spec(protocol(PROTOCOL))
    declared = plan.finetune_tuning_bases(spec)
    assert [(c.name, c.seed, _lr(c)) for c in declared] == [("ref@l4@ft_tuning", 101, None),
                                                          ("wd@l4@ft_tuning", 101, None)]
    tuned = plan.finetune_tuning_bases(spec, {"ref@l4": 0.004, "wd@l4": 0.002})
    assert [(c.name, _lr(c)) for c in tuned] == [("ref@l4@ft_tuning", "0.004"), ("wd@l4@ft_tuning", "0.002")]
    assert [c.name for c in plan.finetune_tuning_bases(spec, {"ref@l4": 0.004})] == ["ref@l4@ft_tuning"]


def test_the_tuning_cells_include_every_rate_a_grid_may_grow_to(protocol) -> None:
    spec = load_spec(protocol(PROTOCOL))
    assert spec.tuning_cells() == {f"{a}@l4@lr{r}" for a in ("ref", "wd") for r in ("1e-3", "2e-3", "4e-3", "8e-3")}


def test_under_a_recipe_every_cell_a_check_names_is_its_family(protocol) -> None:
    spec = load_spec(protocol(PROTOCOL.replace("finetune: python_docs\n", "").split("finetune_lr_tuning")[0]
                              + "checks:\n  primary:\n    - {arm: wd@l4, metric: val/loss, reference: ref@l4}\n"
                              "  components:\n    - {arm: wd@l4, without: ref@l4, metric: val/loss, part: decay}\n"))
    mapped = spec.at_recipe_size("gpt2_124m").checks
    assert mapped["primary"] == [{"arm": "wd", "metric": "val/loss", "reference": "ref"}]
    assert mapped["components"] == [{"arm": "wd", "without": "ref", "metric": "val/loss", "part": "decay"}]


def test_under_a_recipe_the_declaration_is_the_headline_at_the_recipes_size(protocol) -> None:
    text = PROTOCOL.split("finetune:")[0].replace("  - {arms: [ref, wd], rung: l4, seeds: [0, 1]}\n",
                                                  "  - {arms: [ref, wd], rung: l4, seeds: [0, 1]}\n"
                                                  "  - {arms: [ref, wd], rung: l2, seeds: [0, 1], stage: below}\n")
    spec = load_spec(protocol(text + "checks:\n  primary:\n    - {arm: wd@l4, metric: val/loss}\n"))
    declared = spec.in_stages(["headline"]).at_recipe_size("gpt2_124m").declared()
    assert [b.arms for b in declared.blocks] == [("ref", "wd")]
    assert declared.checks["primary"] == [{"arm": "wd", "metric": "val/loss"}]
    assert len(spec.in_stages(["headline"]).declared().blocks) == 2   # on the CPU ladder: the whole protocol
