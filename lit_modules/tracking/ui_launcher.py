"""`make mlflow-ui`: the MLflow UI in its own process group, stopped as a whole on Ctrl-C or SIGTERM.

    python -m lit_modules.tracking.ui_launcher <mlflow ui options>

`mlflow ui` starts a uvicorn server with worker processes, a job runner and several huey job consumers.
Stopped from outside (make forwards SIGTERM to its recipe only; Ctrl-C reaches whatever is in the
terminal's group), some of them outlive it: the port stays taken and consumers keep running. This launcher
runs MLflow through lit_modules.process_group, which stops its whole process group.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lit_modules.process_group import Stopped, run_as_group


def mlflow_command(options: list[str]) -> list[str]:
    """The `mlflow` entry point of this interpreter's environment, running `ui`."""
    script = Path(sys.executable).with_name("mlflow")
    program = [str(script)] if script.is_file() else [sys.executable, "-m", "mlflow"]
    return [*program, "ui", *options]


def main(argv: list[str] | None = None) -> int:
    options = sys.argv[1:] if argv is None else argv
    try:
        return run_as_group(mlflow_command(options))
    except Stopped as stopped:
        return 128 + stopped.signum


if __name__ == "__main__":
    sys.exit(main())
