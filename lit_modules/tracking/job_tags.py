"""Which scheduler job ran a run, and where that job's log is: tags that lead from a run to its job.

A cell submitted through Hydra's submitit launcher (SLURM, or the local executor) writes its stdout and
stderr under the sweep folder's `.submitit/<job id>/`; the run records those paths, so a failed cell's
log is one click from its MLflow run. A cell placed by the device-cells launcher
(hydra_plugins/llm_ablate_launchers/device_cells.py) records its devices, its slot (which of a device's k
places) and its log. Outside a scheduler there are no such tags.
"""

from __future__ import annotations

import os
from typing import Mapping

# Set by the device-cells launcher for each cell it starts.
CELL_DEVICES_ENV, CELL_SLOT_ENV, CELL_LOG_ENV = "LLM_ABLATE_CELL_DEVICES", "LLM_ABLATE_CELL_SLOT", "LLM_ABLATE_CELL_LOG"
CELL_TAGS = {CELL_DEVICES_ENV: "cell.devices", CELL_SLOT_ENV: "cell.slot", CELL_LOG_ENV: "cell.log"}


def scheduler_tags(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    tags: dict[str, str] = {}
    if environ.get("SLURM_JOB_ID"):
        tags["slurm.job_id"] = environ["SLURM_JOB_ID"]
        if environ.get("SLURM_ARRAY_JOB_ID"):
            tags["slurm.array_job"] = f"{environ['SLURM_ARRAY_JOB_ID']}_{environ.get('SLURM_ARRAY_TASK_ID', '')}"
        if environ.get("SLURMD_NODENAME"):
            tags["slurm.node"] = environ["SLURMD_NODENAME"]
    if environ.get("SUBMITIT_EXECUTOR") and environ.get("SUBMITIT_FOLDER"):
        import submitit  # only inside a submitit job

        job = submitit.JobEnvironment()
        tags["submitit.job_id"] = job.job_id
        tags["submitit.stdout"] = str(job.paths.stdout)
        tags["submitit.stderr"] = str(job.paths.stderr)
    tags.update({tag: environ[name] for name, tag in CELL_TAGS.items() if environ.get(name)})
    return tags
