"""A single run's terminal: no library banners or known warnings, and one progress line."""

import subprocess
import sys
from pathlib import Path

from tests.helpers.runs import REPO, tiny_overrides

NOISE = ("GPU available", "TPU available", "litlogger", "litmodels", "LeafSpec", "`Trainer.fit` stopped",
         "Creating initial MLflow database tables", "Updating database tables")  # the run makes a new store


def test_a_run_prints_its_progress_and_none_of_the_libraries_noise(runs_dir: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "lit_modules.train", *tiny_overrides(runs_dir, steps=10)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    output = proc.stdout + proc.stderr
    assert not [word for word in NOISE if word in output], output[-3000:]
    assert "step 10/10 (100%)" in proc.stderr and "val/loss=" in proc.stdout
