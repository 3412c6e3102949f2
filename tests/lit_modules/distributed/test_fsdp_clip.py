"""FSDP clipping: the root FSDP module clips by the whole model's norm (2 ranks, gloo, on the CPU).

Lightning's FSDP strategy cannot run a fit on the CPU in this torch (FSDP needs an accelerator unless given
device_id=cpu, and Lightning passes none), so the ranks wrap the module in FSDP themselves and hand it to a real
Lightning Trainer with the FSDP strategy, whose precision plugin refuses norm clipping: the module's hook must
go around it. The clipped gradients equal one process clipping the unsharded gradients of the whole batch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from lit_modules.distributed.fsdp_clip import clip_sharded_grad_norm
from tests.helpers.fsdp_clip_ranks import model_and_batch
from tests.helpers.runs import REPO

MAX_NORM = 0.05  # well under the gradient's norm (~1-3): clipping must engage


def test_a_plain_module_is_left_to_lightnings_clip() -> None:
    model = torch.nn.Linear(2, 2)
    model(torch.ones(1, 2)).sum().backward()
    before = model.weight.grad.clone()
    assert clip_sharded_grad_norm(model, 1e-3) is False and torch.equal(model.weight.grad, before)


def test_two_fsdp_ranks_clip_by_the_whole_models_norm(tmp_path: Path) -> None:
    out = tmp_path / "clipped.pt"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "tests.helpers.fsdp_clip_ranks", str(out), str(MAX_NORM)],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"},
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sharded = torch.load(out)

    model, x, y = model_and_batch()  # one process, the whole batch, torch's own clip
    F.cross_entropy(model(x).float().reshape(-1, model.cfg.vocab_size), y.reshape(-1)).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
    assert norm > 10 * MAX_NORM
    assert sharded["norm_before"] == pytest.approx(float(norm), rel=1e-5)
    reference = {f"model.{name}": p.grad for name, p in model.named_parameters()}
    assert sorted(sharded["grads"]) == sorted(reference)
    for name, grad in reference.items():
        torch.testing.assert_close(sharded["grads"][name], grad, rtol=1e-5, atol=1e-7, msg=name)
    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in sharded["grads"].values()]))
    assert float(total) == pytest.approx(MAX_NORM, rel=1e-4)
