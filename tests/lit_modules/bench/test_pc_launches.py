"""The PC layer's counted cost per training step (`bench.pc_launches`): the counting rule, and that PC batched
by shape adds the same operations at any depth, below a bound (real Lightning fits of the tiny model)."""

from __future__ import annotations

import torch
from torch.profiler import profile, record_function

from lit_modules.bench.pc_launches import MARK, OPTIMIZER_SCOPE, TARGET, is_view, launch_counts, pc_launch_rows

SHORT = ["data.seq_len=16", "data.batch_size=2"]


def test_views_launch_nothing_and_compute_does():
    views = ("detach", "select", "transpose", "unsqueeze", "view", "unbind", "to")
    assert all(is_view(f"aten::{op}") for op in views)
    assert not any(is_view(f"aten::{op}") for op in ("bmm", "add_", "_to_copy", "stack", "linalg_vector_norm"))


def test_an_op_counts_once_outside_views_and_the_optimizer():
    a = torch.randn(3, 4, 5)
    with profile() as prof:
        with record_function(f"{MARK}1"):
            b = torch.bmm(a, a.mT)  # bmm counts; mT is a view
            c = b.double()  # aten::to is a view-like alias; the _to_copy it calls counts (once)
            torch.linalg.vector_norm(c, dim=1)  # counts once, not again for what it calls
            with record_function(f"{OPTIMIZER_SCOPE}Fake.step"):
                b.add_(1.0)  # inside the optimizer: counted apart
        b.mul_(2.0)  # outside every marked step: not counted
    [counts] = launch_counts(prof.events(), steps=1)
    assert counts["launch"] == {"aten::bmm": 1, "aten::_to_copy": 1, "aten::linalg_vector_norm": 1}
    assert counts["optimizer"] == {"aten::add_": 1}
    assert {"aten::mT", "aten::to"} <= set(counts["all"]) and "aten::_to_copy" not in counts["all"]


def test_a_closure_inside_the_optimizer_step_counts_and_the_update_after_its_backward_does_not():
    """Lightning's automatic loop runs forward and backward inside `optimizer.step(closure)`."""
    w = torch.randn(4, 4, requires_grad=True)
    with profile() as prof:
        with record_function(f"{MARK}1"), record_function(f"{OPTIMIZER_SCOPE}Fake.step"):
            torch.mm(w, w).sum().backward()  # the closure: forward and backward
            with torch.no_grad():
                w.sub_(w.grad)  # the update
    [counts] = launch_counts(prof.events(), steps=1)
    assert counts["optimizer"] == {"aten::sub_": 1}
    assert counts["launch"]["aten::mm"] >= 3  # the forward's and the backward's


def test_pc_adds_the_same_operations_at_any_depth():
    """2 and 4 layers of the tiny model, PC level 4 on FFN + O (two shape groups): every profiled step adds the
    same count at both depths, below the target, with no host read (`item`) among them."""
    ratios, rows = pc_launch_rows(extra=SHORT, steps=2, model="tiny", depths=(4,))
    assert [r.key for r in ratios] == ["pc_launches_per_step_tiny_level4",
                                       "pc_launches_per_step_tiny_level4_4_layers"]
    two, four = rows
    assert (two["layers"], four["layers"]) == (2, 4)
    assert two["samples"] == four["samples"] == [two["samples"][0]] * 2  # same at every step and every depth
    assert 0 < two["samples"][0] <= TARGET.bound
    assert not {"aten::item", "aten::_local_scalar_dense"} & set(four["added_by_op"])
    # What does grow with depth: the views (free) and the CPU optimizer's per-tensor update of the gammas.
    assert four["optimizer_ops_added"][0] == 2 * two["optimizer_ops_added"][0] > 0
    assert all(p > b > 0 for p, b in zip(four["peak_bytes"], four["baseline_peak_bytes"]))
