"""Optuna driver: a persistent, resumable, failure-tolerant study whose trials are Hydra-composed runs.

    python -m sweeps.optuna_sweep sweep=default sweep.n_trials=8 sweep.workers=2 [run overrides]
    python -m sweeps.optuna_sweep sweep=default sweep.storage=<URL> --worker    # join it from another machine

Re-running the same command continues the study until `n_trials` trials have finished (COMPLETE or
PRUNED), counting earlier invocations. Trials left RUNNING by a dead worker stop sending heartbeats;
they are failed and retried with the same parameters. A worker started by hand with `--worker` (on any
machine that reaches the same `sweep.storage` and MLFLOW_TRACKING_URI) joins the study its driver made:
the parent run id is in the study's user attributes. One MLflow parent run per study, one child per
trial. Hydra composes each trial; Optuna is driven directly (the Hydra sweeper plugin cannot prune or
resume).
"""

from __future__ import annotations

from lit_modules.quiet import quiet_libraries  # first: before tqdm is imported

import subprocess
import sys

from lit_modules.config.errors import ConfigError
from lit_modules.runs.uri_masking import mask_password
from sweeps.optuna_args import parse_args
from sweeps.sweep_config import load_sweep_config
from sweeps.sweep_workers import spawn_workers


def main(argv: list[str] | None = None) -> int:
    quiet_libraries()
    inv = parse_args(sys.argv[1:] if argv is None else argv)
    others: list[subprocess.Popen] = []
    try:
        cfg, specs = load_sweep_config(inv.sweep_name, inv.sweep_dotlist)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - e.g. OmegaConf rejecting a malformed sweep.* override
        print(f"error: {mask_password(str(err).splitlines()[0])}", file=sys.stderr)
        return 2
    if not inv.worker:
        # The other workers start now, before this process imports Lightning, MLflow and Optuna (~8 s of
        # CPU) and validates: their imports run beside this one's, so their first trials start with its first.
        others = spawn_workers(argv, cfg.workers)
    from sweeps.study_driver import drive  # the heavy imports

    return drive(inv, cfg, specs, others)


if __name__ == "__main__":
    sys.exit(main())
