"""steady_heap: freed activation memory stays in the process, so a step stops faulting pages in (issue 27).

The pattern is a training step's: a forward keeps a stack of activations, then all of them are freed at
once (as backward frees them). 82 MiB of them: above any trim threshold glibc's defaults can move to
(2 x at most 32 MiB), so the defaults hand that top of the heap back to the kernel every step,
so the next step faults it in again; with steady_heap() the pages stay. Each case runs in a fresh
interpreter: glibc's thresholds are per process and move with its history.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lit_modules.steady_heap import steady_heap

STEP_PAGES = 41 * 512  # 41 activations of 512 x 1024 float32 (82 MiB), 4 KiB pages

FAULTS_PER_STEP = """
import resource, sys
import torch
torch.set_num_threads(1)
if sys.argv[1] == "steady":
    from lit_modules.steady_heap import steady_heap
    print(steady_heap(), file=sys.stderr)

def step():
    kept = [torch.ones(512, 1024)]
    for _ in range(40):
        kept.append(kept[-1] * 0.5)
    return float(kept[-1][0, 0])

for _ in range(10):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""

glibc_only = pytest.mark.skipif(not steady_heap().startswith(("steady", "left as set")),
                                 reason="glibc's malloc only (this process: " + steady_heap() + ")")


def _faults_per_step(mode: str, env: dict[str, str] | None = None) -> float:
    # One OpenMP/MKL thread pinned: glibc's defaults move with the process's history, and with OpenMP's pool
    # started the same control faulted 1,086 pages per step instead of 20,449 (steady: 26 either way).
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    clean.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP, mode], capture_output=True, text=True, check=True,
                         env={**clean, **(env or {})})
    return float(out.stdout.strip())


@glibc_only
def test_a_steady_heap_stops_the_per_step_page_faults():
    default = _faults_per_step("default")
    steady = _faults_per_step("steady")
    # The control: with glibc's defaults this step faults most of its pages in again every time, so the
    # steady figure below is a property of steady_heap, not of the pattern.
    assert default > 0.5 * STEP_PAGES, f"glibc's defaults faulted only {default:.0f} pages per step"
    assert steady < 0.01 * STEP_PAGES, f"{steady:.0f} pages per step faulted with a steady heap"


@glibc_only
def test_a_users_own_malloc_setting_is_left_as_set():
    code = "from lit_modules.steady_heap import steady_heap; print(steady_heap()); print(steady_heap())"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**clean, "MALLOC_TRIM_THRESHOLD_": "131072"}).stdout.splitlines()
    assert out == ["left as set: MALLOC_TRIM_THRESHOLD_"] * 2
    # ... and then the pattern faults as glibc's defaults would have it (the user's choice holds).
    assert _faults_per_step("steady", {"MALLOC_TRIM_THRESHOLD_": "131072"}) > 0.5 * STEP_PAGES


def test_a_training_run_steadies_the_heap(monkeypatch, tmp_path):
    """training_run.run calls it before building the model (every entry point trains through run)."""
    import lit_modules.training_run as training_run

    calls = []
    monkeypatch.setattr(training_run, "steady_heap", lambda: calls.append("called") or "steady")
    monkeypatch.setattr(training_run, "build_data", lambda cfg: (_ for _ in ()).throw(RuntimeError("stop here")))
    from lit_modules.config.composition import compose_run_config

    cfg = compose_run_config(["regime=steps", "trainer.max_steps=2", f"runs_dir={tmp_path}"])
    with pytest.raises(RuntimeError, match="stop here"):
        training_run.run(cfg)
    assert calls == ["called"]
