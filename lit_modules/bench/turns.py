"""Interleaved blocks: several workloads take turns, a few steps at a time, in one process.

Each workload (a Lightning fit, the plain loop, a forward pass, the matmuls of a step) runs in its own
thread, and only one thread runs at a time: a workload calls `hook(step)` at the start of every step, and
at every `block_steps`-th step after `warmup` the hook closes the workload's block and hands the turn on.
The order is setup (each workload builds and warms up on its own turn), then A B C ... A B C ... A: the
first workload gets one block more, so every other block sits between two of its blocks and `block_ratios`
divides it by their mean (a linear drift of the machine cancels). Every block starts right after a switch,
so what a switch costs (cold caches) weighs on all sides alike.

The first place reads a few percent fast: the same model object timed against itself read 1.03-1.05 with
the reference first, while two workloads in later places agreed with each other (an A/A test).
So a comparison takes a `pacer` (a copy of the reference) into the first place, and the workloads it
compares follow it in later places, forward in even rounds and reversed in odd ones (P A B, P B A, ...):
`round_ratios` divides each block by the reference's block of the same round, so the first place's bias
falls on the pacer alone and a linear drift within a round cancels over pairs of rounds.

Each block is timed on three clocks (`Clocks`): the thread's CPU time (`time.thread_time`, the figure of
single-threaded rows), wall time and the process's CPU time. The waiting threads are blocked, so a
process CPU time well above the thread's means the work left the timing thread (e.g. intra-op threads):
`off_thread_share` reports it and the rows name it. Each workload's thread first sets torch's thread count
to the caller's: a new Python thread's matmuls otherwise ran on every core (MKL's default, whatever
`torch.get_num_threads()` said), half their CPU time off the timing thread (the SGEMM peak read 2x).
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch

Hook = Callable[[int], None]
# run(hook, steps): do `steps` steps, calling hook(step) at the start of each (step = 0, 1, ..., steps - 1)
Workload = Callable[[Hook, int], None]


@dataclass(frozen=True)
class Clocks:
    thread: float
    wall: float
    process: float

    @staticmethod
    def now() -> "Clocks":
        return Clocks(time.thread_time(), time.perf_counter(), time.process_time())

    def __sub__(self, other: "Clocks") -> "Clocks":
        return Clocks(self.thread - other.thread, self.wall - other.wall, self.process - other.process)

    def on(self, clock: str) -> float:
        return getattr(self, clock)


class BenchAborted(RuntimeError):
    """Another workload failed: the waiting ones stop at their next step."""


@dataclass
class _Worker:
    name: str
    run: Workload
    needed: int  # blocks to measure
    steps: int
    blocks: list
    start: Clocks | None = None
    error: BaseException | None = None
    thread: threading.Thread | None = None


def steps_needed(warmup: int, block_steps: int, blocks: int) -> int:
    """Steps a workload runs for `blocks` blocks: the last block closes at the start of the step after it."""
    return warmup + blocks * block_steps + 1


PACER = "pacer"


def interleave(workloads: dict[str, Workload], blocks: int, block_steps: int, warmup: int,
               pacer: Workload | None = None) -> dict[str, list[Clocks]]:
    """name -> its blocks' Clocks (the first workload: blocks + 1, the others: blocks). With a `pacer`, it
    takes the first place (returned as "pacer") and the workloads follow, reversed in odd rounds."""
    if blocks < 1 or block_steps < 1 or warmup < 0:
        raise ValueError("interleave needs blocks >= 1, block_steps >= 1 and warmup >= 0")
    if pacer is not None:
        if PACER in workloads:
            raise ValueError(f"a workload may not be called '{PACER}' when a pacer takes the first place")
        workloads = {PACER: pacer, **workloads}
    cond = threading.Condition()
    state = {"turn": None, "abort": False}
    names = list(workloads)
    workers = {}
    for index, name in enumerate(names):
        needed = blocks + 1 if index == 0 else blocks
        workers[name] = _Worker(name, workloads[name], needed, steps_needed(warmup, block_steps, needed), [])

    def wait_for_turn(worker: _Worker) -> None:
        with cond:
            cond.wait_for(lambda: state["turn"] == worker.name or state["abort"])
            if state["abort"]:
                raise BenchAborted(f"{worker.name}: stopped, another workload failed")

    def hook_of(worker: _Worker) -> Hook:
        def hook(step: int) -> None:
            if step < warmup or (step - warmup) % block_steps:
                return
            now = Clocks.now()
            if worker.start is not None:
                worker.blocks.append(now - worker.start)
                worker.start = None
            if len(worker.blocks) >= worker.needed:
                return  # measured: it finishes on this turn, unmeasured
            with cond:  # hand the turn back and wait for the next one
                state["turn"] = None
                cond.notify_all()
            wait_for_turn(worker)
            worker.start = Clocks.now()

        return hook

    threads = torch.get_num_threads()

    def body(worker: _Worker) -> None:
        try:
            torch.set_num_threads(threads)  # per thread: MKL's count in a new thread is not the caller's
            wait_for_turn(worker)
            worker.run(hook_of(worker), worker.steps)
            if len(worker.blocks) < worker.needed:
                raise RuntimeError(f"{worker.name} ended after {len(worker.blocks)} of {worker.needed} blocks "
                                   f"(it ran fewer than the {worker.steps} steps it was given)")
        except BenchAborted:
            pass
        except BaseException as err:  # noqa: BLE001 - handed to the controller, which raises it
            worker.error = err
        finally:
            with cond:
                worker.steps = -1  # finished
                state["turn"] = None
                cond.notify_all()

    def give(worker: _Worker) -> None:
        with cond:
            if worker.steps < 0:
                raise RuntimeError(f"{worker.name} finished before its turn")
            state["turn"] = worker.name
            cond.notify_all()
            cond.wait_for(lambda: state["turn"] is None)
        if worker.error is not None:
            raise worker.error

    for worker in workers.values():
        worker.thread = threading.Thread(target=body, args=(worker,), name=f"bench-{worker.name}", daemon=True)
        worker.thread.start()
    try:
        for name in names:  # setup and warmup, one at a time
            give(workers[name])
        followers = names[1:]
        for round_index in range(blocks):
            order = followers if pacer is None or round_index % 2 == 0 else followers[::-1]
            for name in [names[0], *order]:
                give(workers[name])
        give(workers[names[0]])
    except BaseException:
        with cond:
            state["abort"] = True
            cond.notify_all()
        raise
    finally:
        for worker in workers.values():
            worker.thread.join(timeout=60)
    return {name: worker.blocks for name, worker in workers.items()}


def block_ratios(reference: list[Clocks], variant: list[Clocks], clock: str = "thread",
                 invert: bool = False) -> tuple[float, ...]:
    """variant block i over the mean of reference blocks i and i + 1 (its neighbours in time); `invert`:
    that mean over the variant block (a speed instead of a cost)."""
    if len(reference) != len(variant) + 1:
        raise ValueError("the reference has one block more than each variant")
    out = []
    for i, block in enumerate(variant):
        around = (reference[i].on(clock) + reference[i + 1].on(clock)) / 2.0
        value = block.on(clock) / around
        out.append(1.0 / value if invert else value)
    return tuple(out)


def round_ratios(reference: list[Clocks], variant: list[Clocks], clock: str = "thread",
                 invert: bool = False) -> tuple[float, ...]:
    """variant block i over the reference's block i, both behind a pacer in round i (`interleave(...,
    pacer=...)`); `invert`: the reference's over the variant's (a speed instead of a cost)."""
    if len(reference) != len(variant):
        raise ValueError("behind a pacer every compared workload has one block per round")
    out = []
    for ref, block in zip(reference, variant):
        value = block.on(clock) / ref.on(clock)
        out.append(1.0 / value if invert else value)
    return tuple(out)


def first_place_effect(timed: dict[str, list[Clocks]], reference: str, clock: str = "thread") -> float:
    """Median of the reference's blocks over the pacer's around them: what the first place is worth (the
    pacer is a copy of the reference, so 1.0 is no effect; 1.04 reads the first place 4% fast)."""
    return statistics.median(block_ratios(timed[PACER], timed[reference], clock=clock))


def per_step(blocks: list[Clocks], block_steps: int, clock: str = "thread") -> list[float]:
    return [b.on(clock) / block_steps for b in blocks]


def off_thread_share(blocks: list[Clocks]) -> float:
    """Median share of the process's CPU time that was not the timing thread's (0: all on the thread)."""
    shares = [(b.process - b.thread) / b.process for b in blocks if b.process > 0]
    return statistics.median(shares) if shares else 0.0


def loop_workload(step: Callable[[], None]) -> Workload:
    """A workload of one call per step (a forward pass, the matmuls of one training step)."""

    def run(hook: Hook, steps: int) -> None:
        for index in range(steps):
            hook(index)
            step()

    return run
