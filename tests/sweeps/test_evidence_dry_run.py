"""`python -m sweeps.evidence ... dry_run=true`: every cell composes and validates, and nothing is launched,
opened or exported (it once opened a parent run and replaced results/<paper>/ and RESULTS.md with a report
of no runs)."""

import pytest

from sweeps.evidence.args import is_dry_run
from sweeps.evidence.driver import main


def test_a_dry_run_validates_the_protocol_and_leaves_store_results_and_ledger_alone(
        capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    results = tmp_path / "results"
    (results / "wisca").mkdir(parents=True)
    (results / "wisca" / "report.md").write_text("committed\n")
    ledger = tmp_path / "RESULTS.md"
    ledger.write_text("committed ledger\n")
    argv = ["papers=wisca", "stages=headline,below,scale", "dry_run=true", f"runs_dir={tmp_path / 'runs'}",
            f"results_dir={results}", f"ledger={ledger}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # 8 seeds x (6 arms at l4 + 4 at l2 + 6 at l3 + 6 at l6) = 176 test cells; the seven grids 5 rates x 2 arms
    # x 2 seeds, but l6's 20 TPP pair's 3 rates x 2 arms x 1 seed: 6 x 20 + 6 = 126 tuning cells (before any
    # tie-break seed or edge extension, which need tuning results)
    assert "[wisca] dry run: 176 cells and 126 tuning cells in stage(s) headline, below, scale compose and validate" in out
    assert not (tmp_path / "runs").exists()
    assert sorted(p.name for p in results.rglob("*")) == ["report.md", "wisca"]
    assert (results / "wisca" / "report.md").read_text() == "committed\n"
    assert ledger.read_text() == "committed ledger\n"


def test_a_protocol_that_does_not_compose_is_refused_in_a_dry_run_too(capsys: pytest.CaptureFixture[str],
                                                                       tmp_path) -> None:
    assert main(["papers=wisca", "dry_run=true", f"runs_dir={tmp_path / 'runs'}", "model.d_model=63"]) == 2
    assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("overrides", "dry"), [
    (["dry_run=true"], True), (["+dry_run=True"], True), (["dry_run=false"], False), ([], False),
    (["dry_run=true", "dry_run=false"], False), (["trainer.dry_run=true"], False)])
def test_the_dry_run_is_read_from_the_run_overrides(overrides: list[str], dry: bool) -> None:
    assert is_dry_run(overrides) is dry
