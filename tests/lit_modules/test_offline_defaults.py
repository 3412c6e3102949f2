"""Importing any entry point turns MLflow's usage telemetry off (it would call out from a background thread)."""

import os
import subprocess
import sys

import pytest

from tests.helpers.runs import REPO

# mlflow.telemetry switches itself off under pytest or CI: the child gets an environment without those.
NOT_CI = {k: v for k, v in os.environ.items()
          if k not in ("PYTEST_CURRENT_TEST", "CI", "MLFLOW_DISABLE_TELEMETRY", "DO_NOT_TRACK", "GITHUB_ACTIONS")}
PROBE = "import {module}, mlflow; from mlflow.telemetry import get_telemetry_client; print(get_telemetry_client())"


def telemetry_after_import(module: str, env: dict) -> str:
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("module", ["lit_modules.train", "sweeps.optuna_sweep", "sweeps.ablate", "analysis.report",
                                    "lit_modules.evaluation.run_eval"])
def test_an_entry_point_leaves_mlflow_telemetry_off(module: str) -> None:
    assert telemetry_after_import(module, NOT_CI) == "None"


def test_mlflow_alone_would_have_it_on_and_a_user_can_opt_in() -> None:
    assert telemetry_after_import("json", NOT_CI) != "None"  # what the default above guards against
    opted_in = telemetry_after_import("lit_modules.train", {**NOT_CI, "MLFLOW_DISABLE_TELEMETRY": "false"})
    assert opted_in != "None"
