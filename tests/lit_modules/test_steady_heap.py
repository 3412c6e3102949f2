"""steady_heap: freed activation memory stays in the process, so a step stops faulting pages in.

The pattern is a training step's: a forward keeps a stack of activations, then all of them are freed at
once (as backward frees them), 82 MiB of them. With small thresholds glibc hands them back to the
kernel every step and the next step faults them in again; with steady_heap() the pages stay. Each case
runs in a fresh interpreter: glibc's thresholds are per process and its defaults move with its history.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lit_modules.steady_heap import steady_heap

STEP_PAGES = 41 * 512  # 41 activations of 512 x 1024 float32 (82 MiB), 4 KiB pages

FAULTS_PER_STEP = """
import os, resource, sys
import torch
torch.set_num_threads(1)
if sys.argv[1] in ("small", "small_then_steady"):  # a history that left glibc's thresholds small
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    assert libc.mallopt(-3, 131072) == 1 and libc.mallopt(-1, 131072) == 1
if sys.argv[1] in ("steady", "small_then_steady"):
    from lit_modules.steady_heap import steady_heap
    print(steady_heap(), file=sys.stderr)

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def step():
    kept = [torch.ones(512, 1024)]
    for _ in range(40):
        kept.append(kept[-1] * 0.5)
    return float(kept[-1][0, 0])

start = rss_mib()
for _ in range(10):
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20, rss_mib() - start)
"""

glibc_only = pytest.mark.skipif(not steady_heap().startswith(("steady", "left as set")),
                                 reason="glibc's malloc only (this process: " + steady_heap() + ")")


def _after_steps(mode: str, env: dict[str, str] | None = None) -> tuple[float, float]:
    """(pages faulted per step after warmup, MiB the process still holds once a step has freed everything)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    clean.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", FAULTS_PER_STEP, mode], capture_output=True, text=True, check=True,
                         env={**clean, **(env or {})})
    faults, kept = out.stdout.split()
    return float(faults), float(kept)


SMALL_THRESHOLDS = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}


@glibc_only
def test_a_steady_heap_keeps_a_steps_memory_and_stops_its_page_faults():
    # The control: small thresholds (glibc's defaults drift between them and large ones with a process's
    # history: this pattern kept 0 or 86-88 MiB by default) hand the freed 82 MiB back every step.
    small_faults, small_kept = _after_steps("small")
    assert small_kept < 20 and small_faults > 0.1 * STEP_PAGES, (small_faults, small_kept)
    steady_faults, steady_kept = _after_steps("small_then_steady")
    assert steady_kept > 70, f"a steady heap kept only {steady_kept:.0f} MiB of the step's 82"
    assert steady_faults < 0.01 * STEP_PAGES, f"{steady_faults:.0f} pages per step faulted with a steady heap"


@glibc_only
def test_a_users_own_malloc_setting_is_left_as_set():
    code = "from lit_modules.steady_heap import steady_heap; print(steady_heap()); print(steady_heap())"
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**clean, "MALLOC_TRIM_THRESHOLD_": "131072"}).stdout.splitlines()
    assert out == ["left as set: MALLOC_TRIM_THRESHOLD_"] * 2
    # The user's small thresholds hold: every 2 MiB activation is mapped and unmapped again, so a step
    # ends holding none of them and faults them all in next time.
    faults, kept = _after_steps("steady", SMALL_THRESHOLDS)
    assert kept < 20, f"the user's thresholds were overridden: {kept:.0f} MiB kept after a step"
    assert faults > 0.1 * STEP_PAGES


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
