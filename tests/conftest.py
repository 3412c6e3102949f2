"""Shared fixtures: every test that trains writes its runs under a pytest tmp folder, never runs/.

Helpers that tests import (tiny_overrides, mlflow_client, all_runs, hand-made ablations, the MoLS probe)
live in tests/helpers/, not here.
"""

import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("MLFLOW_TRACKING_URI", None)  # tests use their own store under tmp_path
# Under pytest-xdist (make test runs -n 2 on 2 cores) each worker and the processes it starts get one
# thread: two workers asking for two OpenMP threads each would oversubscribe the cores (10x slower).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
# Reports that sweeps and ablations write at the end go to a scratch folder, never the repo's reports/.
os.environ["LLM_REPORTS_DIR"] = tempfile.mkdtemp(prefix="llm-ablate-reports-")

import logging
from pathlib import Path

import pytest

# Fixtures that start throwaway PostgreSQL and MLflow servers (used by tests/distributed/).
pytest_plugins = ["tests.helpers.servers"]

# Lightning and MLflow are chatty at INFO; failures still show their output.
for name in ("lightning.pytorch", "lightning.fabric", "mlflow", "alembic"):
    logging.getLogger(name).setLevel(logging.WARNING)


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"
