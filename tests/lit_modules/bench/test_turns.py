"""Interleaved blocks: workloads take turns one at a time, in the order setup, A B ... A B ... A; every block
is the same number of steps, and each ratio is a block over its reference neighbours (no time is asserted:
the structure and the arithmetic are)."""

from __future__ import annotations

import threading

import pytest

from lit_modules.bench.turns import (
    Clocks,
    block_ratios,
    first_place_effect,
    interleave,
    loop_workload,
    off_thread_share,
    per_step,
    round_ratios,
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


def test_a_pacer_takes_the_first_place_and_the_others_alternate_behind_it():
    log: list[str] = []

    def recording(name: str):
        def run(hook, steps):
            for step in range(steps):
                hook(step)
                log.append(name)

        return run

    timed = interleave({"a": recording("a"), "b": recording("b"), "c": recording("c")}, blocks=4, block_steps=1,
                       warmup=1, pacer=recording("p"))
    assert {k: len(v) for k, v in timed.items()} == {"pacer": 5, "a": 4, "b": 4, "c": 4}
    turns = [log[0]] + [n for prev, n in zip(log, log[1:]) if n != prev]
    # setup p a b c (a warmup step each), then rounds p a b c / p c b a / ..., the pacer's last block; no
    # compared workload is ever first, and each is as often before as after each other one.
    assert turns[:4] == ["p", "a", "b", "c"]
    rounds = turns[4:]
    assert rounds[:8] == ["p", "a", "b", "c", "p", "c", "b", "a"]
    assert rounds[8:16] == rounds[:8] and rounds[16:] == ["p"]
    with pytest.raises(ValueError, match="may not be called 'pacer'"):
        interleave({"pacer": recording("x")}, blocks=2, block_steps=1, warmup=0, pacer=recording("p"))


def test_round_ratios_divide_by_the_reference_block_of_the_same_round():
    ref = [Clocks(1.0, 2.0, 1.0), Clocks(2.0, 4.0, 2.0)]
    var = [Clocks(3.0, 1.0, 3.0), Clocks(1.0, 8.0, 1.0)]
    assert round_ratios(ref, var) == (3.0, 0.5)
    assert round_ratios(ref, var, clock="wall") == (0.5, 2.0)
    assert round_ratios(ref, var, invert=True) == (1 / 3.0, 2.0)
    with pytest.raises(ValueError, match="one block per round"):
        round_ratios(ref, var[:1])


def test_the_first_place_effect_is_the_reference_over_the_pacer_around_it():
    pacer = [Clocks(1.0, 1.0, 1.0), Clocks(1.0, 1.0, 1.0), Clocks(1.0, 1.0, 1.0)]
    # the same work in a later place taking 4% longer on the thread clock reads 1.04
    timed = {"pacer": pacer, "ref": [Clocks(1.04, 1.0, 1.04), Clocks(1.04, 1.0, 1.04)]}
    assert first_place_effect(timed, "ref") == pytest.approx(1.04)
    assert first_place_effect(timed, "ref", clock="wall") == pytest.approx(1.0)


def test_a_workloads_matmuls_stay_on_its_own_thread():
    """The caller's torch thread count holds in each workload's thread (a new thread's MKL otherwise used
    every core, and the thread clock saw half the work): the CPU time is the timing thread's."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        a = torch.randn(512, 512)
        timed = interleave({"mm": loop_workload(lambda: [a @ a for _ in range(4)])}, blocks=3, block_steps=2, warmup=1)
    finally:
        torch.set_num_threads(before)
    assert off_thread_share(timed["mm"]) < 0.2
