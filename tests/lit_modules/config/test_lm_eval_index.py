"""The task-name index: the names lm-eval's own registry lists, read without importing lm-eval."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lit_modules.config import lm_eval_index
from lit_modules.config.eval_tasks import unknown_task_sentence
from tests.helpers.runs import REPO


def test_the_committed_index_is_the_installed_lm_evals_registry():
    """Kept correct: for the version it names, the index holds exactly what TaskManager().all_tasks lists (a
    new lm-eval is read from its own registry until the index is rebuilt, see the next test)."""
    version, names = lm_eval_index.read_index()
    assert version is not None and len(names) > 1000
    if version != lm_eval_index.installed_version():
        pytest.skip(f"the index is lm-eval {version}'s; rebuild it: python -m lit_modules.config.lm_eval_index")
    assert names == lm_eval_index.registry_names()


def test_another_lm_eval_version_is_read_from_its_own_registry(monkeypatch):
    monkeypatch.setattr(lm_eval_index, "installed_version", lambda: "0.0.0-other")
    monkeypatch.setattr(lm_eval_index, "registry_names", lambda: frozenset({"only_this_task"}))
    lm_eval_index.standard_task_names.cache_clear()
    try:
        assert lm_eval_index.standard_task_names() == frozenset({"only_this_task"})
    finally:
        lm_eval_index.standard_task_names.cache_clear()


def test_a_known_task_is_accepted_and_a_typo_gets_the_close_names():
    assert unknown_task_sentence(["hellaswag", "arc_easy", "boolq", "arc_*"]) is None  # names and a glob
    sentence = unknown_task_sentence(["hellaswagg"], key="tasks=hellaswagg")
    assert sentence.startswith("tasks=hellaswagg names 'hellaswagg', which is neither a local task")
    assert "closest: hellaswag" in sentence and "\n" not in sentence


def test_the_sentence_imports_no_lm_eval():
    code = ("import sys\nfrom lit_modules.config.eval_tasks import unknown_task_sentence\n"
            "assert 'closest: arc_easy' in unknown_task_sentence(['arc_eazy'])\n"
            "print(sorted(m for m in ('lm_eval', 'lightning', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_rebuilding_the_index_gives_the_same_bytes(tmp_path):
    """The file is deterministic (sorted names, no gzip time stamp): a rebuild changes it only when lm-eval's
    names change."""
    if lm_eval_index.read_index()[0] != lm_eval_index.installed_version():
        pytest.skip("another lm-eval than the index's: its bytes are meant to differ")
    assert lm_eval_index.write_index(tmp_path / "index.gz") == len(lm_eval_index.read_index()[1])
    assert (tmp_path / "index.gz").read_bytes() == lm_eval_index.INDEX.read_bytes()
