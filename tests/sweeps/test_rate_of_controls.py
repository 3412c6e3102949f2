"""Calibration controls run at another arm's tuned rate (`rate_of`, times `rate_factor`): the rate of the
reference's cell at the control's own rung, in its grid's key; a reference without a rate leaves the control
out; each mistake in declaring one is one sentence naming the arm."""

from __future__ import annotations

import re

import pytest

from analysis.lr_tuning import LrTuning
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from sweeps import lr_tuning
from sweeps.evidence import plan
from sweeps.evidence.args import EvidenceArgs
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.spec import Arm, Block, EvidenceSpec
from sweeps.evidence.stages import run_stages
from tests.helpers.protocols import assert_refused_before_any_cell

ARMS = """arms:
  ref: [optim.weight_decay=0.05]
  ref_init1: {overrides: [init.std=0.021], rate_of: ref}
  ref_lr_quarter: {rate_of: ref, rate_factor: 0.25}
"""
BLOCKS = """blocks:
  - {arms: [ref, ref_init1, ref_lr_quarter], rung: l4, seeds: [0, 1]}
  - {arms: [ref, ref_init1, ref_lr_quarter], rung: l2, seeds: [0], stage: below}
"""
GRIDS = """lr_tuning:
  - {arms: [ref@l4], grid: [2.0e-3, 4.0e-3], tuning_seeds: [100]}
  - {arms: [ref@l2], grid: [2.0e-3, 4.0e-3], tuning_seeds: [100]}
"""


def rates(cells: list[plan.Cell]) -> dict[str, str | None]:
    """Cell name -> the optim.lr its words set (None: the preset's)."""
    out = {}
    for cell in cells:
        words = [w for w in cell.words if w.startswith("optim.lr=")]
        out[cell.name] = words[-1].split("=", 1)[1] if words else None
    return out


def test_a_control_runs_at_its_references_rate_at_its_own_rung_times_its_factor(protocol, capsys) -> None:
    spec = load_spec(protocol(ARMS + BLOCKS + GRIDS))
    cells = plan.block_cells(spec, spec.blocks, chosen={"ref@l4": 0.004})
    assert rates(cells) == {"ref@l4": "0.004", "ref_init1@l4": "0.004", "ref_lr_quarter@l4": "0.001"}
    assert [c.seed for c in cells if c.name == "ref_lr_quarter@l4"] == [0, 1]
    err = capsys.readouterr().err  # ref@l2 got no rate: its controls are left out, and say why
    assert "`ref_lr_quarter@l2` runs at `ref@l2`'s tuned rate (rate_of), which it did not get" in err
    both = plan.block_cells(spec, spec.blocks, chosen={"ref@l4": 0.004, "ref@l2": 0.002})
    assert {n: r for n, r in rates(both).items() if n.endswith("@l2")} == {
        "ref@l2": "0.002", "ref_init1@l2": "0.002", "ref_lr_quarter@l2": "0.0005"}
    quarter = next(c for c in cells if c.name == "ref_lr_quarter@l4")
    cfg = validate(compose_run_config(["experiment=smoke", *quarter.words]))
    assert (cfg.optim.lr, cfg.model.name, cfg.ablation.arm) == (0.001, "l4", "ref_lr_quarter@l4")
    null = validate(compose_run_config(["experiment=smoke", *next(c for c in cells if c.name == "ref_init1@l4").words]))
    assert (null.optim.lr, null.init.std, null.optim.weight_decay) == (0.004, 0.021, 0.1)  # ref's rate, not its wd
    assert plan.control_rates(spec, {"ref@l4": 0.004}) == {  # the provenance's rate_of_chosen
        "ref_init1@l4": {"rate_of": "ref@l4", "rate_factor": 1.0, "rate": 0.004},
        "ref_lr_quarter@l4": {"rate_of": "ref@l4", "rate_factor": 0.25, "rate": 0.001}}


def test_the_dry_run_composes_a_control_at_the_preset_rate(protocol, tmp_path, capsys) -> None:
    from sweeps.evidence.driver import main

    spec = load_spec(protocol(ARMS + BLOCKS + GRIDS))
    assert set(rates(plan.block_cells(spec, spec.blocks)).values()) == {None}
    assert main(["papers=odd", "stages=headline,below", "dry_run=true", f"runs_dir={tmp_path / 'runs'}"]) == 0
    assert "[odd] dry run: 9 cells and 4 tuning cells" in capsys.readouterr().out


def test_a_control_takes_its_references_key() -> None:
    tuning = LrTuning(("m",), (5e-3, 1e-2), (100,), key="optim.muon_lr")
    arms = {"m": Arm("m", ("optim=muon",)), "c": Arm("c", ("optim=muon",), rate_of="m", rate_factor=0.5)}
    spec = EvidenceSpec("odd", "smoke", (Block(("m", "c"), (0,)),), lr_tuning=(tuning,), arms=arms)
    words = {c.name: c.words for c in plan.block_cells(spec, spec.blocks, chosen={"m": 0.01})}
    assert words["c"] == ("optim=muon", "ablation.arm=c", "optim.muon_lr=0.005")


def test_a_references_grid_runs_in_the_first_stage_whose_cells_need_it(protocol) -> None:
    spec = load_spec(protocol(ARMS + "blocks:\n  - {arms: [ref_lr_quarter], rung: l4, seeds: [0]}\n"
                              "  - {arms: [ref], rung: l4, seeds: [0], stage: scale}\n"
                              "lr_tuning: {arms: [ref@l4], grid: [2.0e-3, 4.0e-3], tuning_seeds: [100]}\n"))
    assert spec.stage_tunings("headline") == list(spec.lr_tuning) and spec.stage_tunings("scale") == []
    assert spec.in_stages(["headline"]).lr_tuning == spec.lr_tuning  # the control keeps its reference's grid


@pytest.mark.parametrize("picked, undecided, expected", [
    ({"ref@l4": 0.004}, [], {"ref@l4": "0.004", "ref_init1@l4": "0.004", "ref_lr_quarter@l4": "0.001"}),
    ({}, ["ref@l4"], None),  # no rate for the reference: no test cell of the pair or its controls, and a failure
])
def test_a_stage_runs_its_controls_at_the_rate_it_chose(protocol, monkeypatch, tmp_path, picked, undecided,
                                                       expected) -> None:
    spec = load_spec(protocol(ARMS + "blocks:\n  - {arms: [ref, ref_init1, ref_lr_quarter], rung: l4, seeds: [0]}\n"
                              "lr_tuning: {arms: [ref@l4], grid: [2.0e-3, 4.0e-3], tuning_seeds: [100]}\n"))
    monkeypatch.setattr(lr_tuning, "tune", lambda *a: (0, picked, undecided))
    launched = []
    failed = run_stages(spec, EvidenceArgs(runs_dir=str(tmp_path / "runs")), lambda g: launched.append(g) or 0, {}, {})
    assert failed == len(undecided)
    cells = {a: dict(w.split("=", 1) for w in g.arm_overrides[a])["optim.lr"] for gs in launched for g in gs
             for a in g.arms}
    assert cells == (expected or {})


@pytest.mark.parametrize("arms, grids, sentence", [
    ("  odd1: {rate_of: nobody}\n", GRIDS,
     "arm `odd1` takes its rate from `nobody` (rate_of), which is none of the protocol's arms"),
    ("  odd1: {rate_of: ref_init1}\n", GRIDS,
     "arm `odd1` takes its rate from `ref_init1`, which takes its own from `ref`; rate_of names a tuned arm"),
    ("", GRIDS.replace("[ref@l2]", "[ref@l2, ref_lr_quarter@l2]"),
     "lr_tuning tunes `ref_lr_quarter@l2`, but arm `ref_lr_quarter` takes its rate from `ref` (rate_of)"),
    ("", GRIDS.split("  - {arms: [ref@l2]")[0],
     "arm `ref_init1` runs `ref_init1@l2` at `ref@l2`'s tuned rate (rate_of), but no lr_tuning grid tunes `ref@l2`."),
    ("  odd1: {overrides: [optim.lr=0.01], rate_of: ref}\n", GRIDS,
     "arm `odd1` sets optim.lr=0.01, but its optim.lr is `ref@l4`'s tuned rate (rate_of); drop that override."),
    ("  odd1: {at: {l4: [+optim.lr=0.01]}, rate_of: ref}\n", GRIDS, "arm `odd1` sets +optim.lr=0.01, but its optim.lr"),
    ("  odd1: {rate_of: ref, rate_factor: 0}\n", GRIDS, "arm `odd1`: rate_factor is a positive number"),
    ("  odd1: {rate_of: ref, rate_factor: -0.25}\n", GRIDS, "arm `odd1`: rate_factor is a positive number"),
    ("  odd1: {rate_of: ref, rate_factor: quarter}\n", GRIDS, "arm `odd1`: rate_factor is a positive number"),
    ("  odd1: {rate_of: ref, rate_factor: true}\n", GRIDS, "arm `odd1`: rate_factor is a positive number"),
    ("  odd1: {rate_factor: 0.25}\n", GRIDS, "arm `odd1` gives rate_factor without rate_of"),
])
def test_a_bad_control_is_one_sentence_naming_it(protocol, arms, grids, sentence) -> None:
    text = ARMS + arms + BLOCKS + ("  - {arms: [odd1], rung: l4, seeds: [3]}\n" if arms else "") + grids
    with pytest.raises(ConfigError, match=re.escape(sentence)):
        load_spec(protocol(text))


def test_a_bad_control_stops_make_evidence_before_any_cell(protocol, tmp_path, capsys) -> None:
    paper = protocol(ARMS + "  odd1: {rate_of: nobody}\n" + BLOCKS + GRIDS)
    assert_refused_before_any_cell(paper, tmp_path, capsys, "arm `odd1` takes its rate from `nobody` (rate_of)")
