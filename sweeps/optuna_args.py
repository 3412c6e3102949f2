"""The words of `python -m sweeps.optuna_sweep`: the sweep's name and settings, the run overrides, a worker's flags.

Its own module so the study's driver (sweeps/study_driver.py) reads the type without importing the entry point
that starts it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Invocation:
    sweep_name: str
    sweep_dotlist: list[str]
    run_overrides: list[str]
    worker: bool = False
    worker_index: int = 0
    parent_run_id: str | None = None
    await_parent: bool = False  # spawned by the driver before its set-up: waits for the parent run


def parse_args(argv: list[str]) -> Invocation:
    inv = Invocation("default", [], [])
    args = iter(argv)
    for arg in args:
        if arg == "--worker":
            inv.worker = True
        elif arg == "--parent-run-id":
            inv.parent_run_id = next(args)
        elif arg == "--await-parent":
            inv.await_parent = True
        elif arg == "--worker-index":
            inv.worker_index = int(next(args))
        elif arg.startswith("sweep="):
            inv.sweep_name = arg.split("=", 1)[1]
        elif arg.startswith("sweep."):
            inv.sweep_dotlist.append(arg[len("sweep."):])
        elif arg.startswith("runs_dir="):  # the sweep's folder, as for `make ablate`: its study and trials go there
            inv.sweep_dotlist.append(arg)
        else:
            inv.run_overrides.append(arg)
    return inv
