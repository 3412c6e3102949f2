"""`python -m lit_modules.train --help`: every run-config group of conf/ with its options and default, from
the files alone (no torch, no Hydra composition), and Hydra's own help still reachable."""

from __future__ import annotations

import subprocess
import sys

from lit_modules.config import files
from lit_modules.config.help import OTHER_VERBS, help_text


def test_every_group_is_listed_with_its_options_and_its_default_marked() -> None:
    text = help_text()
    lines = {line.split(":", 1)[0].strip(): line for line in text.splitlines() if line.startswith("  ") and ":" in line}
    groups = [p.name for p in files.CONF_DIR.iterdir() if p.is_dir() and p.name not in ("hydra", *OTHER_VERBS)]
    for group in groups:
        for option in files.options(group):
            assert option in lines[group], (group, option)
    assert "tiny*" in lines["model"] and "adamw*" in lines["optim"] and "null*" in lines["wisca"]
    assert "folders: evidence/" in lines["experiment"]
    assert "evidence/ (make evidence)" in text and "evidence" not in lines


def test_help_answers_without_importing_torch_and_hydra_help_is_hydras() -> None:
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "lit_modules.train", "--help"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.startswith("train: one run") and "Config groups" in done.stdout
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported and "lightning" not in imported and "mlflow" not in imported
    hydra = subprocess.run([sys.executable, "-m", "lit_modules.train", "--hydra-help"], capture_output=True, text=True,
                           check=True)
    assert "powered by Hydra" in hydra.stdout and "== Configuration groups ==" in hydra.stdout
