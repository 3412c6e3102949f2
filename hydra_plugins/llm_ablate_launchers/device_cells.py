"""`hydra/launcher=device_cells`: ablation cells placed on this machine's devices, k at once per device, each
cell on one device or on `nproc_per_cell` of them through torchrun.

Small cells leave a GPU mostly idle: with `cells_per_device=k` each device (a GPU, or the CPU) trains k cells
at once, every cell a process of its own that sees only its device (CUDA_VISIBLE_DEVICES). Large cells need
several devices: with `nproc_per_cell=N` each cell is `torchrun --standalone --nproc_per_node=N -m
lit_modules.train <its overrides>` on N devices of its own (the driver has set trainer.devices=N), whose
rank 0 opens the cell's one MLflow run. A free slot takes the next cell, whichever it is.

Every cell runs `python -m lit_modules.train <the job's overrides>`: the same composition, validation, run,
parent and skip-if-finished as a job of Hydra's own launchers. Its output goes to
`<sweep dir>/.cells/<job number>.log`; the run records its devices, slot and log (tracking/job_tags.py), and
`<sweep dir>/.cells/placement.json` records where and when each cell ran. The launcher waits for every cell,
then reports the failed ones, as the submitit launchers here do.
"""

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

# No `from __future__ import annotations` in these plugin modules: Hydra's plugin scan runs them outside
# sys.modules, where dataclasses cannot resolve string annotations.
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, ListConfig

from lit_modules.tracking.job_tags import CELL_DEVICES_ENV, CELL_LOG_ENV, CELL_SLOT_ENV

log = logging.getLogger(__name__)
POLL_S = 0.2


def cell_command(overrides: Sequence[str], nproc: int) -> list[str]:
    """One cell as a process: a training run, or torchrun's `nproc` ranks of it (one node, its own rendezvous)."""
    train = ["-m", "lit_modules.train", *overrides]
    if nproc <= 1:
        return [sys.executable, *train]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *train]


def visible_gpus() -> list[str]:
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES names them (indices otherwise)."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


@dataclass
class Slot:
    """Where one cell runs: its devices (a group of nproc), and which of the device's k places it takes."""

    devices: tuple[str, ...]
    place: int

    @property
    def name(self) -> str:
        return f"{','.join(self.devices)}#{self.place}"


def slots(devices: Sequence[str], cells_per_device: int, nproc: int) -> list[Slot]:
    """Every place a cell can run at once: each group of `nproc` devices, `cells_per_device` times. The CPU is
    one device that every rank of a cell shares."""
    if list(devices) == ["cpu"]:
        nproc = 1
    groups = [tuple(devices[i:i + nproc]) for i in range(0, len(devices) - nproc + 1, nproc)]
    return [Slot(group, place) for place in range(cells_per_device) for group in groups]


class DeviceCellLauncher(Launcher):
    def __init__(self, accelerator: str = "cpu", cells_per_device: int = 1, nproc_per_cell: int = 1,
                 devices: Optional[Any] = None) -> None:
        self.accelerator, self.cells_per_device, self.nproc = accelerator, int(cells_per_device), int(nproc_per_cell)
        self.devices = [str(d) for d in devices] if isinstance(devices, (list, tuple, ListConfig)) else None
        self.config: Optional[DictConfig] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config

    def _devices(self) -> list[str]:
        if self.devices is not None:
            return self.devices
        return visible_gpus() if self.accelerator in ("gpu", "cuda") else ["cpu"]

    def _environment(self, slot: Slot, log_path: Path) -> dict[str, str]:
        env = {**os.environ, CELL_DEVICES_ENV: ",".join(slot.devices), CELL_SLOT_ENV: slot.name,
               CELL_LOG_ENV: str(log_path)}
        if self.accelerator in ("gpu", "cuda"):
            env["CUDA_VISIBLE_DEVICES"] = ",".join(slot.devices)  # the cell sees its devices as 0..nproc-1
        return env

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        folder = Path(str(self.config.hydra.sweep.dir)) / ".cells"
        folder.mkdir(parents=True, exist_ok=True)
        free = slots(self._devices(), self.cells_per_device, self.nproc)
        if not free:
            raise RuntimeError(f"{self.nproc} devices per cell, and only {len(self._devices())} visible here.")
        waiting = list(enumerate(job_overrides, start=initial_job_idx))
        running: dict[int, tuple[subprocess.Popen, Slot, float, Any]] = {}
        codes: dict[int, int] = {}
        placement: dict[int, dict] = {}
        while waiting or running:
            while waiting and free:
                idx, overrides = waiting.pop(0)
                slot = free.pop(0)
                log_path = folder / f"{idx}.log"
                log.info(f"\t#{idx} on {slot.name}: {' '.join(filter_overrides(overrides))}")
                handle = log_path.open("w")
                proc = subprocess.Popen(cell_command(overrides, self.nproc), env=self._environment(slot, log_path),
                                        stdout=handle, stderr=subprocess.STDOUT)
                running[idx] = (proc, slot, time.time(), handle)
            time.sleep(POLL_S)
            for idx in [i for i, (proc, *_) in running.items() if proc.poll() is not None]:
                proc, slot, started, handle = running.pop(idx)
                handle.close()
                codes[idx] = proc.returncode
                placement[idx] = {"devices": list(slot.devices), "slot": slot.name, "pid": proc.pid, "start": started,
                                  "end": time.time(), "returncode": proc.returncode, "log": str(folder / f"{idx}.log")}
                free.append(slot)
        (folder / "placement.json").write_text(json.dumps(placement, indent=1, sort_keys=True))
        return [self._result(idx, list(overrides), codes[idx], folder)
                for idx, overrides in enumerate(job_overrides, start=initial_job_idx)]

    @staticmethod
    def _result(idx: int, overrides: list[str], code: int, folder: Path) -> JobReturn:
        result = JobReturn(overrides=overrides, status=JobStatus.COMPLETED if code == 0 else JobStatus.FAILED)
        if code == 0:
            result.return_value = None
        else:
            log.error(f"cell #{idx} exited with code {code}; its log: {folder / f'{idx}.log'}")
            result.return_value = RuntimeError(f"cell #{idx} exited with code {code}; its log: {folder / f'{idx}.log'}")
        return result
