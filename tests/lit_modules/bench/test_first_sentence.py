"""The first sentence comes before the heavy stack (issue 27 item 7): validation and the dry run's plan
import neither Lightning nor MLflow, a validation refusal and a dry run are answered before training_run
loads, and the bench row reads a real command's first line (no time is asserted)."""

from __future__ import annotations

import subprocess
import sys

from lit_modules.bench.first_sentence import CASES, first_line_seconds
from lit_modules.bench.verdict import Ratio
from tests.helpers.runs import REPO

PROBE = ("import sys, runpy; sys.argv = ['train', *sys.argv[1:]]\n"
         "try:\n    runpy.run_module('lit_modules.train', run_name='__main__')\n"
         "except SystemExit as e:\n    code = e.code\nelse:\n    code = 0\n"
         "heavy = [m for m in ('lightning', 'mlflow', 'lit_modules.training_run', 'lit_modules.build') if m in sys.modules]\n"
         "print('HEAVY', ','.join(heavy), 'EXIT', code)\n")


def _probe(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_validation_and_the_dry_run_plan_load_neither_lightning_nor_mlflow():
    code = ("import sys, lit_modules.config.validate, lit_modules.plan.dry_run, lit_modules.techniques\n"
            "print([m for m in ('lightning', 'mlflow') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr


def test_a_validation_refusal_is_the_same_sentence_before_the_training_stack_loads():
    done = _probe("optim.lr=-1")
    assert "error: The learning rate must be positive." in done.stderr
    assert done.stdout.strip().endswith("HEAVY  EXIT 2")


def test_a_dry_run_prints_its_plan_before_the_training_stack_loads():
    done = _probe("dry_run=true", "model=tiny")
    assert done.stdout.startswith("model        tiny:") and "budget" in done.stdout
    assert done.stdout.strip().endswith("HEAVY  EXIT 0")


def test_the_bench_row_reads_a_refusals_first_line():
    seconds, line = first_line_seconds(CASES["composition_refusal"])
    assert seconds > 0 and line.startswith("error: There is no option 'nonexistent' in the config group 'model'")


def test_the_first_sentence_rows_have_one_key_per_case(monkeypatch):
    from lit_modules.bench import first_sentence

    calls = []
    monkeypatch.setattr(first_sentence, "first_line_seconds", lambda args: calls.append(args[0]) or (1.5, "line"))
    ratios: list[Ratio] = []
    rows: list[dict] = []
    first_sentence.first_sentence_rows(3, ratios, rows)
    firsts = [args[0] for args in CASES.values()]
    assert calls == firsts * 9  # 3 processes per repeat, the cases taking turns
    assert [r.key for r in ratios] == [f"first_sentence_s_{c}" for c in CASES]
    assert all(r.target.bound == 2.0 and r.clock == "wall" for r in ratios)
    assert rows[0]["median_s"] == 1.5 and rows[0]["command"] == "python -m lit_modules.train model=nonexistent"
