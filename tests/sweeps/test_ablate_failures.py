"""An ablation whose cells fail says so: a non-zero exit, how many cells failed and why, a FAILED parent,
and the report written all the same, listing them."""

import os
from pathlib import Path

from tests.helpers.runs import all_runs
from sweeps.ablate import main as ablate_main

DIVERGING = ["optim.lr=1000.0", "optim.grad_clip=0", "trainer.divergence_factor=1.5"]


def test_an_ablation_with_failed_cells_exits_nonzero_saying_how_many(runs_dir: Path, capsys) -> None:
    args = ["experiment=smoke", f"runs_dir={runs_dir}", "trainer.max_steps=10", "seeds=0", *DIVERGING]
    assert ablate_main(args) == 1
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert "2 of 2 cells did not finish" in line and "DivergenceError" in line
    runs = all_runs(runs_dir)
    (parent,) = [r for r in runs if r.data.tags.get("ablation.role") == "parent"]
    assert parent.info.status == "FAILED"
    assert sorted(r.info.status for r in runs if r.data.tags.get("ablation.arm")) == ["FAILED", "FAILED"]
    report = (Path(os.environ["LLM_REPORTS_DIR"]) / "smoke" / "report.md").read_text()
    assert "Child runs: 2 FAILED" in report and report.count("DivergenceError") == 2  # each failed cell listed
