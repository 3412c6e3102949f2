"""devices_per_cell=2 through the submitit launcher's path (SLURM's, with submitit's local executor): the cell's
job starts its two ranks with torchrun (CPU, gloo), and the one MLflow run records the job."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps.ablate import main as ablate_main
from tests.helpers.runs import all_runs

pytestmark = pytest.mark.distributed


def test_a_cell_job_starts_its_ranks_with_torchrun(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    assert ablate_main(["experiment=smoke", "arms=baseline", "seeds=0", "devices_per_cell=2", "launcher=submitit_local",
                        "report=false", "trainer.max_steps=12", "trainer.num_threads=1", f"runs_dir={runs_dir}"]) == 0
    cells = [r for r in all_runs(runs_dir) if "ablation.arm" in r.data.tags and r.data.tags.get("ablation.role") != "parent"]
    (cell,) = cells  # rank 1 opened no run
    assert cell.info.status == "FINISHED" and cell.data.params["trainer.devices"] == "2"
    assert "submitit.job_id" in cell.data.tags  # the run knows its job ...
    assert "12,288 tokens" in Path(cell.data.tags["submitit.stderr"]).read_text()  # ... whose log has both ranks' tokens
