"""RESULTS.md from exported results folders: one row per (claim check, headline arm, variant), provenance
per paper, the same bytes from the same inputs."""

import shutil

import pytest

from analysis.ledger import main, write_ledger
from analysis.provenance import write_provenance
from analysis.results_data import write_results_data
from tests.helpers.handmade_ablation import handmade

RECORD = {"git_commit": "0123456789abcdef", "git_dirty": False, "command": "make evidence PAPERS=pc_layer",
          "machine": {"platform": "Linux", "cpu": "test cpu", "cpu_count": 2, "python": "3.11"},
          "workers": 2, "threads_per_worker": 1, "date": "2026-01-02T03:04:05+00:00", "wall_time_s": 1500.0}


def _pc_layer():
    """adamw_pc4 ends 0.25 below the baseline on every seed: it reaches the baseline's final loss at 7,680
    of 10,240 tokens (speedup 4/3 exactly) and costs 1.1x the baseline's time per token; two rungs."""
    values = {}
    for variant in ("", "@x4"):
        values[f"adamw_baseline{variant}"] = [3.0, 3.01, 3.02]
        values[f"adamw_pc4{variant}"] = [2.75, 2.76, 2.77]
    spt = {"adamw_baseline": 1e-5, "adamw_pc4": 1.1e-5, "adamw_baseline@x4": 2e-5, "adamw_pc4@x4": 2.2e-5}
    return handmade(values, name="evidence_pc_layer", claim="pc_layer", baseline="adamw_baseline",
                    params={"x4": 400_000}, tokens=8_000_000, seconds_per_token=spt)


def _smoke():
    return handmade({"baseline": [3.0, 3.05, 3.1], "no_decay": [3.0, 3.051, 3.099]}, name="smoke")


@pytest.fixture
def results(tmp_path):
    root = tmp_path / "repo"
    for name, ab in (("smoke", _smoke()), ("pc_layer", _pc_layer())):  # not in name order on purpose
        write_results_data(ab, root / "results" / name)
    write_provenance(root / "results" / "pc_layer", RECORD)
    return root


def _rows(text):
    lines = [l for l in text.splitlines() if l.startswith("| `")]
    return [[cell.strip() for cell in l.strip("|").split(" | ")] for l in lines]


def test_ledger_rows_state_scale_effect_speedup_overhead_verdict_and_link(results):
    out = write_ledger(results / "results", results / "RESULTS.md")
    text = out.read_text()
    rows = _rows(text)
    pc = [r for r in rows if r[0] == "`pc_layer`"]
    # Headline arms only (adamw_pc4; muon_pc2 was not run), per check and per rung, rungs adjacent.
    assert [r[1] for r in pc] == [
        "`adamw_pc4` vs `adamw_baseline` on `speedup`", "`adamw_pc4@x4` vs `adamw_baseline@x4` on `speedup`, `x4`",
        "`adamw_pc4` vs `adamw_baseline` on `val/loss`", "`adamw_pc4@x4` vs `adamw_baseline@x4` on `val/loss`, `x4`",
        "`adamw_pc4` vs `adamw_baseline` on `diag/gmcn/all`", "`adamw_pc4@x4` vs `adamw_baseline@x4` on `diag/gmcn/all`, `x4`",
    ]
    assert pc[4][9] == "**not measured**"  # a check without data still has its row
    speed, loss, loss_x4 = pc[0], pc[2], pc[3]
    # Holm over the four measured primary tests judged them at 0.05/4, /3, /2, /1: each interval at that level.
    assert speed[2] == "primary" and speed[3] == "3"
    assert speed[4] == "1.33x [1.33x, 1.33x; 98.8%]; first crossing 1.33x" and pc[1][4].startswith("1.33x [1.33x, 1.33x; 98.3%]")
    assert loss[4] == "-0.25 [-0.25, -0.25; 97.5%]" and loss_x4[4] == "-0.25 [-0.25, -0.25; 95%]"
    assert speed[5] == "<0.001 (sign-flip 0.250) / <0.001 (4)" and speed[6] == "1.63x"  # the paper's low end, 1.63x-2x
    assert speed[10] == "100k non-emb., 8M tokens, 80 TPP; paper ~281 TPP"
    assert loss_x4[10] == "400k non-emb., 8M tokens, 20 TPP; paper ~281 TPP"
    # Three seeds: the exact sign-flip p cannot go below 2/2^3 = 0.25, and the row says the two tests disagree.
    disagree = " (the exact sign-flip p 0.250 disagrees at this level)"
    assert speed[9] == "**reproduced**; smaller" + disagree
    assert loss[9] == "**reproduced**; no comparable figure in the paper" + disagree
    assert speed[11] == "[report](results/pc_layer/report.md)"
    glance = text[text.index("## The claims at a glance"):text.index("## Verdicts")]
    assert "1.1x wall time per token" in glance and "all its tests are one Holm family" in glance
    smoke = [r for r in rows if r[0] == "`smoke`"]
    assert len(smoke) == 1 and smoke[0][9].startswith("**")
    assert ("- `pc_layer` (`pc_layer/`): commit `0123456789`, 2026-01-02T03:04:05+00:00, wall time 25.0 min, "
            "2 worker(s) x 1 thread(s)") in text
    assert "- `smoke` (`smoke/`): no `provenance.json`." in text
    assert text.index("(`pc_layer/`): commit") < text.index("(`smoke/`): no")  # sorted by folder name


def test_same_inputs_give_a_byte_identical_ledger(results, tmp_path):
    first = write_ledger(results / "results", results / "RESULTS.md").read_bytes()
    assert write_ledger(results / "results", results / "RESULTS.md").read_bytes() == first
    copy = tmp_path / "elsewhere"
    shutil.copytree(results, copy)
    assert write_ledger(copy / "results", copy / "RESULTS.md").read_bytes() == first


def test_ledger_cli_and_its_errors(results, tmp_path, capsys):
    assert main([f"results={results / 'results'}", f"out={results / 'RESULTS.md'}"]) == 0
    assert (results / "RESULTS.md").is_file() and "ledger:" in capsys.readouterr().out
    assert main([f"results={tmp_path / 'none'}", f"out={tmp_path / 'R.md'}"]) == 2
    assert "no exported results folder" in capsys.readouterr().err and not (tmp_path / "R.md").exists()
    assert main(["bogus"]) == 2
    (results / "results" / "smoke" / "data" / "runs.csv").unlink()
    before = (results / "RESULTS.md").read_bytes()
    assert main([f"results={results / 'results'}", f"out={results / 'RESULTS.md'}"]) == 2
    assert "runs.csv is missing" in capsys.readouterr().err
    assert (results / "RESULTS.md").read_bytes() == before  # the previous ledger is kept whole


def test_findings_come_first_and_are_flagged_when_they_read_another_export(results):
    folder = results / "results" / "pc_layer"
    (folder / "findings.md").write_text(
        "Reads the export of commit 0123456789, 2026-01-02T03:04:05+00:00\n\nPC level 4 helps: 1.33x.\n")
    text = write_ledger(results / "results", results / "RESULTS.md").read_text()
    said = text.index("## What the evidence says")
    assert said < text.index("## Verdicts") and "PC level 4 helps: 1.33x." in text
    assert "earlier export" not in text and "Reads the export of" not in text

    write_provenance(folder, {**RECORD, "date": "2026-02-01T00:00:00+00:00"})  # the evidence was re-run
    text = write_ledger(results / "results", results / "RESULTS.md").read_text()
    assert "_Written for an earlier export (commit 0123456789, 2026-01-02T03:04:05+00:00)" in text
    assert "PC level 4 helps" in text

    (folder / "findings.md").write_text("PC level 4 helps.\n")  # no stamp at all
    text = write_ledger(results / "results", results / "RESULTS.md").read_text()
    assert "does not say which export it reads" in text


def test_no_findings_no_section(results):
    text = write_ledger(results / "results", results / "RESULTS.md").read_text()
    assert "## What the evidence says" not in text


def test_a_corrupted_derived_table_is_rewritten_and_named(results, capsys):
    assert main([f"results={results / 'results'}", f"out={results / 'RESULTS.md'}"]) == 0
    capsys.readouterr()
    ledger = (results / "RESULTS.md").read_bytes()
    verdicts = results / "results" / "pc_layer" / "verdicts.csv"
    good = verdicts.read_bytes()
    verdicts.write_bytes(good.replace(b"reproduced", b"opposite", 1))
    assert main([f"results={results / 'results'}", f"out={results / 'RESULTS.md'}"]) == 0
    out = capsys.readouterr().out
    assert "pc_layer/data/: verdicts.csv differed from what the data give" in out
    assert "make report FROM=" in out and "smoke/data/" not in out
    assert verdicts.read_bytes() == good and (results / "RESULTS.md").read_bytes() == ledger
    assert main([f"results={results / 'results'}", f"out={results / 'RESULTS.md'}"]) == 0
    assert "differed" not in capsys.readouterr().out  # nothing left to rewrite


def test_an_exploratory_protocol_stays_out_of_the_ledger_and_says_why(results, capsys):
    toy = handmade({"baseline": [3.0, 3.05, 3.1], "no_decay": [2.9, 2.96, 3.0]}, name="smoke", tokens=144_000)
    write_results_data(toy, results / "results" / "toy")  # 1.44 tokens per parameter: below any regime
    assert main([f"results={results / 'results'}", f"out={results / 'RESULTS.md'}"]) == 0
    out = capsys.readouterr().out
    assert "not in the ledger (exploratory): " in out and "toy: `no_decay` on `val/loss`: below its regime: 1.44 TPP" in out
    text = (results / "RESULTS.md").read_text()
    assert "## Not in the ledger: exploratory protocols" in text and "(`toy/`): `no_decay` on `val/loss`" in text
    assert "`toy`" not in text.split("## Verdicts")[1]  # none of its rows, nor its provenance
