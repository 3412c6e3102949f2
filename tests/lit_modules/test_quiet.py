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


def test_lm_eval_info_lines_stay_quiet_and_its_warnings_show() -> None:
    """A cell's Hydra logging sets the root logger to INFO; lm-eval's ~14 INFO lines per evaluation
    ("Building contexts for ...") then filled `make evidence`'s terminal. Its warnings must still show."""
    import logging

    from lit_modules.quiet import quiet_libraries

    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    root, handler = logging.getLogger(), Collect()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        quiet_libraries()
        logger = logging.getLogger("lm_eval.evaluator")  # as lm_eval's modules name theirs
        logger.info("Running loglikelihood requests")
        logger.warning("Overwriting default num_fewshot of %s from %s to %s", "local_cloze_x", None, 0)
        logger.warning("a task has no validation split")
        logging.getLogger("lit_modules.example").info("our own INFO line")
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    assert seen == ["a task has no validation split", "our own INFO line"]
