"""Hydra's submitit launchers for ablation cells, waiting for every cell before a failure is reported.

`hydra/launcher=slurm` submits each cell as a SLURM job; `hydra/launcher=submitit_local` runs the very
same path (pickled job, submitit folder, per-job logs, job states) as processes on this machine. The
plugin collects results in submission order and raises at the first failed job, so the multirun (and the
ablation driver after it) would end while later cells still run: the parent would be closed and the
report written too early, and a rerun would start those cells a second time. These launchers wait for
every job first, then raise for the failures as before.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher
from omegaconf import OmegaConf

log = logging.getLogger(__name__)


class _EveryCellEnds(BaseSubmititLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        jobs = self._submit(job_overrides, initial_job_idx)
        for job in jobs:
            job.wait()
        for job in jobs:
            if job.exception() is not None:
                log.error(f"cell job {job.job_id} failed; its log: {job.paths.stderr}")
        return [job.results()[0] for job in jobs]  # raises for the first failed job, now that all have ended

    def _submit(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
        """The plugin's submission, unchanged: one executor, one job per cell, as an array where possible."""
        import submitit

        assert self.config is not None
        init_keys = {"submitit_folder", "max_num_timeout"}
        init = {"folder": self.params["submitit_folder"]}
        if "max_num_timeout" in self.params:
            init[f"{self._EXECUTOR}_max_num_timeout"] = self.params["max_num_timeout"]
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, **init)
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{
            key if key in base else f"{self._EXECUTOR}_{key}": value
            for key, value in self.params.items() if key not in init_keys
        })
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        params = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        return list(executor.map_array(self, *zip(*params)))


class LocalCellLauncher(_EveryCellEnds):
    _EXECUTOR = "local"


class SlurmCellLauncher(_EveryCellEnds):
    _EXECUTOR = "slurm"
