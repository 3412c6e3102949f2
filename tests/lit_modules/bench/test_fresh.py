"""A bench repeat in a fresh interpreter: a new process, the result back, an error raised here."""

from __future__ import annotations

import os

import pytest

from lit_modules.bench.fresh import in_fresh_process


def _pid_and_modules(x: int) -> tuple[int, int, bool]:
    import sys

    return os.getpid(), x * 2, "lit_modules.bench.verdict" in sys.modules


def _fails() -> None:
    raise ValueError("no such model")


def test_a_repeat_runs_in_a_new_process_with_nothing_of_this_one_imported():
    import lit_modules.bench.verdict  # noqa: F401 - imported here, so a forked child would have it

    pid, doubled, inherited = in_fresh_process(_pid_and_modules, 21)
    assert pid != os.getpid() and doubled == 42
    assert not inherited  # spawned, not forked: the parent's modules (and heap) do not come along


def test_its_error_is_raised_in_the_caller():
    with pytest.raises(ValueError, match="no such model"):
        in_fresh_process(_fails)
