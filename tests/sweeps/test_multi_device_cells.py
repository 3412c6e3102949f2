"""devices_per_cell=2: an ablation cell trained by two ranks that torchrun started (CPU, gloo), one MLflow run;
the driver and the ranks agree on the cell's config, so a rerun finds it finished."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweeps.ablate import main as ablate_main
from tests.helpers.runs import all_runs

pytestmark = pytest.mark.slow  # ~1-2 min on 2 busy cores: make test-slow


def _cells(runs_dir: Path) -> list:
    return [r for r in all_runs(runs_dir) if "ablation.arm" in r.data.tags and r.data.tags.get("ablation.role") != "parent"]


def test_a_cell_on_two_torchrun_ranks_is_one_run(tmp_path: Path, capsys) -> None:
    runs_dir = tmp_path / "runs"
    args = ["experiment=smoke", "arms=baseline", "seeds=0", "devices_per_cell=2", "report=false",
            "trainer.max_steps=12", "trainer.num_threads=1", f"runs_dir={runs_dir}"]
    assert ablate_main(args) == 0
    (cell,) = _cells(runs_dir)  # rank 1 opened no run of its own
    assert cell.info.status == "FINISHED"
    params = cell.data.params
    assert (params["trainer.devices"], params["trainer.strategy"], params["trainer.accelerator"]) == ("2", "ddp", "cpu")
    assert cell.data.tags["cell.devices"] == "cpu"
    # 2 ranks x 8 sequences x 64 tokens a step: rank 0's progress line and the run count both ranks' tokens
    assert "step 12/12 (100%) | 12,288 tokens" in Path(cell.data.tags["cell.log"]).read_text()
    assert max(m.value for m in _history(runs_dir, cell.info.run_id, "tokens_seen")) == 10 * 2 * 8 * 64  # every 5 steps
    capsys.readouterr()
    assert ablate_main(args) == 0  # the same hash in the driver as in the ranks: nothing runs again
    assert "all 1 cells already finished under this parent" in capsys.readouterr().out
    assert len(_cells(runs_dir)) == 1


def _history(runs_dir: Path, run_id: str, key: str) -> list:
    from tests.helpers.runs import mlflow_client

    return mlflow_client(runs_dir).get_metric_history(run_id, key)
