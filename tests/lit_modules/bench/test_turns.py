"""Interleaved blocks: workloads take turns one at a time, in the order setup, A B ... A B ... A; every block
is the same number of steps, and each ratio is a block over its reference neighbours (no time is asserted:
the structure and the arithmetic are)."""

from __future__ import annotations

import threading

import pytest

from lit_modules.bench.turns import (
    Clocks,
    block_ratios,
    interleave,
    loop_workload,
    off_thread_share,
    per_step,
    steps_needed,
)


def test_workloads_take_turns_one_at_a_time_in_blocks():
    log: list[tuple[str, int]] = []
    running: set[str] = set()

    def recording(name: str):
        def run(hook, steps):
            for step in range(steps):
                hook(step)
                running.add(name)
                assert running == {name}, "two workloads ran at once"
                log.append((name, step))
                running.discard(name)

        return run

    timed = interleave({"a": recording("a"), "b": recording("b")}, blocks=3, block_steps=2, warmup=1)
    assert [len(timed["a"]), len(timed["b"])] == [4, 3]  # the reference has one block more
    assert all(isinstance(c, Clocks) for c in timed["a"] + timed["b"])
    names = [name for name, _ in log]
    turns = [names[0]] + [n for prev, n in zip(names, names[1:]) if n != prev]
    # setup a, setup b (warmup and the first boundary), then a b a b a b and a's last block, which finishes a;
    # b finishes on its last turn.
    assert turns == ["a", "b", "a", "b", "a", "b", "a", "b", "a"]
    assert [s for n, s in log if n == "a"] == list(range(steps_needed(1, 2, 4)))
    assert [s for n, s in log if n == "b"] == list(range(steps_needed(1, 2, 3)))


def test_a_failing_workload_stops_the_others_and_is_raised():
    def fine(hook, steps):
        for step in range(steps):
            hook(step)

    def failing(hook, steps):
        for step in range(steps):
            hook(step)
            if step == 3:
                raise ValueError("boom")

    before = threading.active_count()
    with pytest.raises(ValueError, match="boom"):
        interleave({"a": fine, "b": failing}, blocks=4, block_steps=1, warmup=0)
    assert threading.active_count() == before  # the waiting thread was stopped, not left behind


def test_a_workload_that_ends_early_is_an_error():
    with pytest.raises(RuntimeError, match="ended after"):
        interleave({"a": lambda hook, steps: [hook(s) for s in range(3)]}, blocks=4, block_steps=1, warmup=0)


def test_block_ratios_divide_by_the_reference_blocks_on_either_side():
    ref = [Clocks(1.0, 2.0, 1.0), Clocks(3.0, 2.0, 3.0), Clocks(1.0, 4.0, 1.0)]
    var = [Clocks(4.0, 1.0, 4.0), Clocks(1.0, 6.0, 1.0)]
    assert block_ratios(ref, var) == (2.0, 0.5)
    assert block_ratios(ref, var, clock="wall") == (0.5, 2.0)
    assert block_ratios(ref, var, invert=True) == (0.5, 2.0)
    with pytest.raises(ValueError):
        block_ratios(ref, ref)
    assert per_step(ref, 2) == [0.5, 1.5, 0.5]


def test_off_thread_share_is_the_process_cpu_the_thread_did_not_use():
    assert off_thread_share([Clocks(1.0, 1.0, 1.0), Clocks(1.0, 1.2, 1.0)]) == 0.0
    assert off_thread_share([Clocks(1.0, 1.0, 2.0)] * 3) == 0.5


def test_loop_workload_calls_the_hook_before_every_step():
    calls: list[str] = []
    run = loop_workload(lambda: calls.append("step"))
    run(lambda step: calls.append(f"hook{step}"), 2)
    assert calls == ["hook0", "step", "hook1", "step"]
