"""A run restored from the committed export (sweeps/evidence/restore.py) keeps no checkpoint, so a base that
must still start a fine-tune (or whose fine-tune must still be scored) is trained again first.

    code = retrain(client, restored_bases, relaunch, "test bases")   # relaunch: their cells' launch -> exit code

The restored runs, and the fine-tunes restored from them, leave the grid (MLflow's delete, which keeps them
recoverable), so each cell, no longer found finished by its config hash, runs again in `relaunch` (cells that
are finished skip themselves) and its new run has a checkpoint. A run whose cell did not finish again (the
launch was stopped, refused, or the cell failed) is put back with its fine-tunes, so the next export still
holds what the last one held.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lit_modules.runs import tags
from lit_modules.tracking.run_start import finished_twin

if TYPE_CHECKING:
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient


def restored(runs: list[Run]) -> list[Run]:
    """The runs written from the committed export rather than trained in this store."""
    return [r for r in runs if tags.RESTORED_FROM in r.data.tags]


def retrain(client: MlflowClient, runs: list[Run], relaunch: Callable[[], int], what: str) -> int:
    """Train the restored `runs` again through `relaunch` (their cells' launch); its exit code (0 when there is
    nothing to retrain). Raises what `relaunch` raises, after putting back every run whose cell did not finish."""
    if not runs:
        return 0
    print(f"  {len(runs)} {what} restored from the committed export, which keeps no checkpoint: trained again",
          flush=True)
    retired = []
    for run in runs:
        finetunes = client.search_runs([run.info.experiment_id], max_results=10_000,
                                       filter_string=f"tags.`{tags.FINETUNE_BASE}` = '{run.info.run_id}'")
        for gone in (run, *finetunes):
            client.delete_run(gone.info.run_id)
        retired.append((run, finetunes))
    try:
        return relaunch()
    finally:
        for run, finetunes in retired:
            if finished_twin(client, run.data.tags[tags.PARENT], run.data.tags[tags.CONFIG_HASH]) is None:
                for back in (run, *finetunes):
                    client.restore_run(back.info.run_id)
