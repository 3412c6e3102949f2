"""The evidence protocol's learning-rate tuning: refused declarations, the provenance's declared seeds and
grids, the test and tuning cells, and one protocol run end to end on the smoke preset."""

from pathlib import Path

import pandas as pd
import pytest

from analysis.lr_tuning import LrTuning
from sweeps.evidence import protocol_file
from sweeps.evidence.declared import declared_checks
from sweeps.evidence.driver import main
from sweeps.evidence.plan import block_cells, lr_tuning_cells
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.spec import Arm, Block, EvidenceSpec, Rung
from tests.helpers.protocols import assert_refused_before_any_cell

BLOCKS = "blocks:\n  - {arms: [baseline, no_decay], seeds: [0, 1]}\n"
TUNED = "lr_tuning: {arms: [baseline, no_decay], grid: [1e-3, 3e-3], tuning_seeds: [100, 101]}\n"


@pytest.mark.parametrize("text, sentence", [
    (BLOCKS + "lr_tuning: {arms: [baseline, no_decay], grid: [1e-3, 3e-3], tuning_seeds: [1, 100]}\n",
     ("odd.yaml lr_tuning: tuning seed(s) 1 are also test seeds of `baseline`; a rate chosen on the seeds it is "
      "tested on is biased upward")),
    (BLOCKS + "lr_tuning: {arms: [baseline, snr], grid: [1e-3, 3e-3], tuning_seeds: [100]}\n",
     "odd.yaml lr_tuning tunes `snr`, which no block of the protocol runs (its blocks run baseline, no_decay)."),
    (BLOCKS + "  - {arms: [baseline@lr1e-3], seeds: [2]}\n" + TUNED,
     "would run its tuning cells as `baseline@lr1e-3`, an arm a block runs on test seeds too"),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3], tuning_seeds: [100]}\n",
     "grid needs two or more distinct positive learning rates"),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3, 3e-3]}\n",
     "lr_tuning needs 'arms', 'grid' and 'tuning_seeds' (and may name a 'metric', a 'key', 'tiebreak_seeds' and 'extend'); it has arms, grid."),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [100], key: optim.eps}\n",
     "key is the rate tuned, one of optim.lr, optim.muon_lr (got optim.eps)."),
    (BLOCKS + "lr_tuning:\n  - {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [100]}\n"
     "  - {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [102]}\n",
     "odd.yaml lr_tuning 2 tunes `baseline`, which conf/evidence/odd.yaml lr_tuning 1 tunes already"),
    (BLOCKS + "  - {arms: [no_decay], seeds: [2], stage: scale}\n" + TUNED,
     "tunes arms of the stages headline and scale; one grid tunes arms of one stage"),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [100], tiebreak_seeds: [100]}\n",
     "tiebreak_seeds is a list of distinct integer seeds, none of them a tuning seed (got [100])."),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [100], tiebreak_seeds: [0]}\n",
     "tuning seed(s) 0 are also test seeds of `baseline`"),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [100], extend: 9}\n",
     "extend is how many rates a grid may add past an edge its arms chose, 0 to 4 (got 9)."),
    (BLOCKS + "lr_tuning: {arms: [baseline], grid: [1e-3, 3e-3], tuning_seeds: [100], metric: speedup}\n",
     "metric is a final metric of the tuning runs, such as val/loss (got speedup)"),
])
def test_a_bad_grid_is_one_sentence_and_exit_2_before_any_cell(protocol, tmp_path, capsys, text, sentence) -> None:
    assert_refused_before_any_cell(protocol(text), tmp_path, capsys, sentence)


def test_a_command_line_rate_would_override_the_tuned_ones_and_is_refused(protocol, tmp_path, capsys) -> None:
    paper = protocol(BLOCKS + TUNED)
    assert main([f"papers={paper}", f"runs_dir={tmp_path / 'runs'}", "optim.lr=0.01"]) == 2
    assert "optim.lr=0.01 on the command line would set every cell's rate, but conf/evidence/odd.yaml tunes " \
           "each arm's own (lr_tuning); drop it." in capsys.readouterr().err


def test_a_muon_rate_grid_on_an_arm_without_muon_is_refused(protocol, tmp_path, capsys) -> None:
    paper = protocol(BLOCKS + TUNED.replace("}", ", key: optim.muon_lr}"))
    assert main([f"papers={paper}", f"runs_dir={tmp_path / 'runs'}"]) == 2
    assert "lr_tuning tunes optim.muon_lr of `baseline`, which trains with adamw, not Muon: that grid would tune " \
           "nothing." in capsys.readouterr().err


def test_the_provenance_hash_covers_the_declared_seeds_and_grids(protocol) -> None:
    declared = declared_checks(load_spec(protocol(BLOCKS + TUNED)))
    assert declared["declared_seeds"] == [{"arms": ["baseline", "no_decay"], "seeds": [0, 1], "stage": "headline"}]
    assert declared["lr_tuning"] == [{"arms": ["baseline", "no_decay"], "grid": [1e-3, 3e-3],
                                      "tuning_seeds": [100, 101], "metric": "val/loss", "key": "optim.lr"}]
    assert declared_checks(load_spec(protocol(BLOCKS + TUNED))) == declared  # the same declaration, the same hash
    seeds = declared_checks(load_spec(protocol(BLOCKS.replace("[0, 1]", "[0, 1, 2]") + TUNED)))
    grid = declared_checks(load_spec(protocol(BLOCKS + TUNED.replace("3e-3", "6e-3"))))
    tuning_seeds = declared_checks(load_spec(protocol(BLOCKS + TUNED.replace("101", "102"))))
    hashes = {d["checks_sha256"] for d in (declared, seeds, grid, tuning_seeds)}
    assert len(hashes) == 4


SPEC = EvidenceSpec("toy", "smoke", (Block(("a", "b", "c"), (0, 1)),),
                    lr_tuning=(LrTuning(("a",), (1e-3, 3e-3), (100,)),
                               LrTuning(("b",), (1e-2, 2e-2), (100,), key="optim.muon_lr")),
                    arms={"a": Arm("a"), "b": Arm("b", ("optim=muon",)), "c": Arm("c", extends="smoke/no_decay"),
                          "m": Arm("m", ("optim=muon",))},
                    rungs={"x0.5": Rung("x0.5", "tiny_half")})


def test_tuned_arms_run_at_their_own_rate_and_an_arm_without_one_not_at_all() -> None:
    cells = {(c.name, c.seed): c.words for c in block_cells(SPEC, SPEC.blocks, {"a": 3e-3})}
    assert cells[("a", 1)] == ("ablation.arm=a", "optim.lr=0.003")
    assert cells[("c", 0)] == ("+arm=smoke/no_decay", "ablation.arm=c")  # untuned: as declared
    assert ("b", 0) not in cells  # tuned, and no rate chosen: its test cells do not run
    assert {(c.name, c.words[-1]) for c in block_cells(SPEC, SPEC.blocks, {"b": 0.02})} >= {("b", "optim.muon_lr=0.02")}
    assert len(block_cells(SPEC, SPEC.blocks)) == 6  # the dry run: every cell as declared, no rate


def test_an_arms_tuning_cells_are_one_launch_unless_a_resume_left_only_some_of_them() -> None:
    from sweeps.lr_tuning import launches

    todo = pd.DataFrame([{"arm": arm, "rate": rate, "seed": seed} for arm in ("a", "b") for rate in (1e-3, 3e-3)
                         for seed in (100, 101)])
    assert launches(todo) == [("a", (1e-3, 3e-3), (100, 101)), ("b", (1e-3, 3e-3), (100, 101))]
    partial = todo.drop(index=[0])  # a@1e-3 on seed 100 finished before the stop: the rest of a, by rate
    assert launches(partial) == [("a", (1e-3,), (101,)), ("a", (3e-3,), (100, 101)), ("b", (1e-3, 3e-3), (100, 101))]
    muon = LrTuning(("m@x0.5",), (5e-3, 1e-2), (100,), key="optim.muon_lr")
    cells = lr_tuning_cells(SPEC, [(muon, "m@x0.5", (5e-3, 1e-2), (100,))])
    assert [(c.name, c.seed, c.words) for c in cells] == [
        ("m@x0.5@lr5e-3", 100, ("optim=muon", "model=tiny_half", "ablation.arm=m@x0.5@lr5e-3", "optim.muon_lr=0.005")),
        ("m@x0.5@lr1e-2", 100, ("optim=muon", "model=tiny_half", "ablation.arm=m@x0.5@lr1e-2", "optim.muon_lr=0.01"))]


def test_a_stage_keeps_only_its_own_grids(protocol) -> None:
    spec = load_spec(protocol("rungs: {x4: tiny_x4}\n" + BLOCKS + "  - {arms: [baseline@x4], seeds: [0], stage: scale}\n"
                              + TUNED))
    assert spec.in_stages(["scale"]).lr_tuning == () and spec.in_stages(["headline"]).lr_tuning == spec.lr_tuning
    assert spec.stage_tunings("headline") == list(spec.lr_tuning) and spec.stage_tunings("scale") == []
    assert spec.cells_to_tune() == 8 and "no_decay@lr3e-3" in spec.tuning_cells()


@pytest.mark.slow  # ~70 s on 2 cores: 4 tuning cells and 2 test cells in 4 ablation calls, twice
def test_a_protocol_tunes_each_arms_rate_on_its_tuning_seed_and_tests_at_it(tmp_path: Path, monkeypatch) -> None:
    from analysis.provenance import read_provenance
    from analysis.results_data import read_results_data

    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "smoke.yaml").write_text("preset: smoke\nblocks:\n  - {arms: [baseline, no_decay], seeds: [0]}\n"
                                      "lr_tuning: {arms: [baseline, no_decay], grid: [1e-3, 3e-2], tuning_seeds: [100]}\n")
    monkeypatch.setattr(protocol_file, "SPEC_DIR", specs)
    results = tmp_path / "results"
    argv = ["papers=smoke", f"runs_dir={tmp_path / 'runs'}", f"results_dir={results}",
            f"ledger={tmp_path / 'RESULTS.md'}", "trainer.max_steps=6", "workers=2"]
    assert main(argv) == 0
    runs = read_results_data(results / "smoke").finished
    tuning = runs[runs["arm"].str.contains("@lr")]
    test = runs[~runs["arm"].str.contains("@lr")]
    assert sorted(tuning["arm"]) == ["baseline@lr1e-3", "baseline@lr3e-2", "no_decay@lr1e-3", "no_decay@lr3e-2"]
    assert set(tuning["seed"]) == {"100"} and set(test["seed"]) == {"0"}  # tuning seeds never tested on
    table = pd.read_csv(results / "smoke" / "lr_tuning.csv")
    chosen = dict(zip(table.loc[table["chosen"], "arm"], table.loc[table["chosen"], "rate"]))
    for arm in ("baseline", "no_decay"):
        losses = {float(r["params.optim.lr"]): r["metrics.val/loss"] for _, r in tuning.iterrows()
                  if r["arm"].startswith(f"{arm}@")}
        assert chosen[arm] == min(losses, key=losses.get)  # the tuning seed's best final val/loss
        assert float(test.loc[test["arm"] == arm, "params.optim.lr"].iloc[0]) == chosen[arm]  # tested at it
    record = read_provenance(results / "smoke")
    assert record["lr_tuning_chosen"] == chosen and record["lr_tuning"][0]["tuning_seeds"] == [100]
    assert record["declared_seeds"] == [{"arms": ["baseline", "no_decay"], "seeds": [0], "stage": "headline"}]
    report = (results / "smoke" / "report.md").read_text()
    assert "![" in report and "lr_tuning.png" in report
    # Resumed: no tuning cell runs again, the choice and the report stay as they were.
    assert main(argv) == 0
    assert len(read_results_data(results / "smoke").runs) == len(runs)
    assert (results / "smoke" / "report.md").read_text() == report
    # A record that does not cover the store's cells (a call crashed after its cells, before its export) is
    # replaced by a fresh one on the next call, though nothing new runs.
    import json

    stale = {k: v for k, v in record.items() if k != "finished_work"}
    (results / "smoke" / "provenance.json").write_text(json.dumps({**stale, "date": "2000-01-01T00:00:00+00:00"}))
    assert main(argv) == 0
    fresh = read_provenance(results / "smoke")
    assert fresh["date"] != "2000-01-01T00:00:00+00:00" and fresh["finished_work"] == record["finished_work"]


def test_a_stage_subset_call_keeps_the_rates_earlier_calls_chose() -> None:
    from sweeps.evidence.driver import with_choices

    earlier = {"git_commit": "old", "lr_tuning_chosen": {"a@l2": 6e-3, "a@l4": 3e-3},
               "rate_of_chosen": {"a_init1@l2": {"rate_of": "a@l2", "rate_factor": 1.0, "rate": 6e-3}}}
    record = with_choices({"git_commit": "new"}, earlier, {
        "lr_tuning_chosen": {"a@l4": 4.2e-3},  # the headline's grid, chosen again (it grew)
        "rate_of_chosen": {"a_init1@l4": {"rate_of": "a@l4", "rate_factor": 1.0, "rate": 4.2e-3}},
        "finetune_lr_tuning_chosen": None})  # no fine-tune grid declared: no key
    assert record["git_commit"] == "new"
    assert record["lr_tuning_chosen"] == {"a@l2": 6e-3, "a@l4": 4.2e-3}
    assert set(record["rate_of_chosen"]) == {"a_init1@l2", "a_init1@l4"} and "finetune_lr_tuning_chosen" not in record
    first = with_choices({"git_commit": "x"}, None, {"lr_tuning_chosen": {}, "rate_of_chosen": None})
    assert first == {"git_commit": "x", "lr_tuning_chosen": {}}  # a declared grid with nothing chosen yet says so


def test_the_exported_record_follows_what_the_call_measured_and_declared() -> None:
    from sweeps.evidence.driver import next_record

    declared = {"checks_sha256": "c1", "checks": {"primary": []}, "protocol_sha256": "today"}
    earlier = {"checks_sha256": "c1", "checks": {"primary": []}, "protocol_sha256": "yesterday",
               "git_commit": "old", "lr_tuning_chosen": {"a@l2": 6e-3}}
    now = {"lr_tuning_chosen": {"a@l4": 3e-3}, "rate_of_chosen": None, "finetune_lr_tuning_chosen": None}
    measured = next_record(earlier, declared, {"git_commit": "new"}, now)
    assert measured["git_commit"] == "new" and measured["protocol_sha256"] == "today"
    assert measured["lr_tuning_chosen"] == {"a@l2": 6e-3, "a@l4": 3e-3}
    # nothing new ran under the same declaration (a comment changed in the file): the record stays, the file's
    # hash is today's, so the folder is not marked superseded for ever
    kept = next_record(earlier, declared, None, now)
    assert kept["git_commit"] == "old" and kept["protocol_sha256"] == "today"
    assert kept["lr_tuning_chosen"] == {"a@l2": 6e-3, "a@l4": 3e-3}
    # an earlier record of another declaration: its choices never join; a re-export leaves it as it was
    other = {**earlier, "checks_sha256": "c0", "lr_tuning_chosen": {"g8_origin": 6e-3}}
    assert next_record(other, declared, {"git_commit": "new"}, now)["lr_tuning_chosen"] == {"a@l4": 3e-3}
    assert next_record(other, declared, None, now) is other
    assert next_record(None, declared, None, now)["lr_tuning_chosen"] == {"a@l4": 3e-3}
