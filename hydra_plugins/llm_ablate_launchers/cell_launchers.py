"""Hydra's submitit launchers for ablation cells, waiting for every cell before a failure is reported.

`hydra/launcher=slurm` submits each cell as a SLURM job; `hydra/launcher=submitit_local` runs the very
same path (pickled job, submitit folder, per-job logs, job states) as processes on this machine. The
plugin collects results in submission order and raises at the first failed job, so the multirun (and the
ablation driver after it) would end while later cells still run: the parent would be closed and the
report written too early, and a rerun would start those cells a second time. These launchers wait for
every job first, then raise for the failures as before.

With `nproc_per_cell=N` (the ablation driver's `devices_per_cell=N`) a cell's job starts the cell's N ranks
with torchrun on the node it was given (`gpus_per_node=N` on SLURM), instead of training in the job's own
process: rank 0 opens the cell's one MLflow run, its output is the job's log.
"""

import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher
from omegaconf import OmegaConf

from hydra_plugins.llm_ablate_launchers.device_cells import cell_command

log = logging.getLogger(__name__)
OWN_KEYS = {"nproc_per_cell"}  # this launcher's own settings, not submitit's


@dataclass
class SlurmCellsConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.llm_ablate_launchers.cell_launchers.SlurmCellLauncher"
    nproc_per_cell: int = 1  # > 1: the cell's ranks are started by torchrun in its job


# slurm.yaml's schema. conf/hydra/launcher/submitit_local.yaml is merged with the plugin's schema of the same name
# (Hydra matches them by name), which has no nproc_per_cell: the driver adds it there (+hydra.launcher.nproc_per_cell).
ConfigStore.instance().store(group="hydra/launcher", name="slurm_cells_schema", node=SlurmCellsConf)


class _EveryCellEnds(BaseSubmititLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        jobs = self._submit(job_overrides, initial_job_idx)
        for job in jobs:
            job.wait()
        for job in jobs:
            if job.exception() is not None:
                log.error(f"cell job {job.job_id} failed; its log: {job.paths.stderr}")
        return [job.results()[0] for job in jobs]  # raises for the first failed job, now that all have ended

    def __call__(self, sweep_overrides: List[str], job_dir_key: str, job_num: int, job_id: str,
                 singleton_state: Dict[type, Singleton]) -> JobReturn:
        """The job: the cell in this process, or its ranks under torchrun (nproc_per_cell > 1)."""
        nproc = int(self.params.get("nproc_per_cell") or 1)
        if nproc <= 1:
            return super().__call__(sweep_overrides, job_dir_key, job_num, job_id, singleton_state)
        code = subprocess.run(cell_command(sweep_overrides, nproc)).returncode  # output: this job's log
        if code != 0:
            raise RuntimeError(f"cell #{job_num}: torchrun's {nproc} ranks exited with code {code}")
        return JobReturn(overrides=list(sweep_overrides), status=JobStatus.COMPLETED)

    def _submit(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
        """The plugin's submission, unchanged: one executor, one job per cell, as an array where possible."""
        import submitit

        assert self.config is not None
        init_keys = {"submitit_folder", "max_num_timeout", *OWN_KEYS}
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
