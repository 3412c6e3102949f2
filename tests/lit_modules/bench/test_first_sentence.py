"""The first sentence comes before the heavy stack: validation and the dry run's plan import neither Lightning
nor MLflow, a validation refusal and a dry run are answered before training_run loads, every refusal the
bench times on another verb (resume, eval, export, fine-tune, an HF folder) is one sentence with exit 2 before
Lightning, torch._dynamo, transformers or lm-eval load, and the bench row reads a real command's first line
(no time is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lit_modules.bench.first_sentence import CASES, cut_short_hf_folder, first_line_seconds
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
    seconds, line = first_line_seconds(CASES["composition_refusal"].command())
    assert seconds > 0 and line.startswith("error: There is no option 'nonexistent' in the config group 'model'")


HEAVY = ("lightning", "torch._dynamo", "transformers", "lm_eval", "lit_modules.training_run", "lit_modules.build")
# Any entry point run as __main__; at exit, which of HEAVY it had loaded (on stdout, after whatever it wrote).
ANY_MAIN = ("import atexit, runpy, sys\n"
            f"atexit.register(lambda: print('HEAVY', ','.join(m for m in {HEAVY!r} if m in sys.modules)))\n"
            "module = sys.argv[2]; sys.argv = [module, *sys.argv[3:]]\n"
            "runpy.run_module(module, run_name='__main__', alter_sys=True)\n")
SLOW_PATHS = [case for case in CASES if CASES[case].target.bound == 3.0]


@pytest.mark.parametrize("case", SLOW_PATHS)
def test_each_slow_path_refuses_in_one_sentence_before_the_training_stack(case, tmp_path):
    """These refusals imported Lightning first (15-37 s on a loaded 2-core machine); now none of HEAVY loads."""
    cut_short_hf_folder(tmp_path / "hf_cut_short")
    argv = CASES[case].command(str(tmp_path))
    assert argv[0] == "-m"
    done = subprocess.run([sys.executable, "-c", ANY_MAIN, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "HEAVY", done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf_cut_short"]  # no store, no export, no run


def test_the_first_sentence_rows_have_one_key_per_case(monkeypatch):
    from lit_modules.bench import first_sentence

    calls = []
    monkeypatch.setattr(first_sentence, "first_line_seconds", lambda argv: calls.append(argv[1]) or (1.5, "line"))
    ratios: list[Ratio] = []
    rows: list[dict] = []
    first_sentence.first_sentence_rows(3, ratios, rows)
    modules = [case.argv[1] for case in CASES.values()]
    assert calls == modules * 9  # 3 processes per repeat, the cases taking turns
    assert [r.key for r in ratios] == [f"first_sentence_s_{c}" for c in CASES]
    assert all(r.clock == "wall" for r in ratios)
    assert [r.target.bound for r in ratios] == [2.0] * 4 + [3.0] * 5
    assert rows[0]["median_s"] == 1.5 and rows[0]["command"] == "python -m lit_modules.train model=nonexistent"
    assert rows[-1]["command"] == "python -m lit_modules.train init_from=hf:<scratch>/hf_cut_short runs_dir=<scratch>/runs"


def test_the_cut_short_folder_is_refused_as_cut_short(tmp_path):
    """The bench's HF case is the issue's truncated file: its header promises more bytes than it holds."""
    from lit_modules.hf import ModelFolderError
    from lit_modules.hf.folder import weight_files

    folder = cut_short_hf_folder(tmp_path / "f")
    with pytest.raises(ModelFolderError, match="incomplete metadata, file not fully covered"):
        weight_files(Path(folder))
