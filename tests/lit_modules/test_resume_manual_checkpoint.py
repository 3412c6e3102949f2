"""A checkpoint whose optimizer steps Lightning counted as manual optimization (an earlier training step stepped
the optimizer itself) cannot continue under the automatic loop, which would restart its count at step 0 on the
restored weights: resume refuses it in one sentence (exit 2) before the run, its history or its checkpoint
change. The checkpoint here is a real one: a run trained by a module that steps the optimizer itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lit_modules import build
from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.lm_module import CausalLMModule
from lit_modules.runs import tags
from lit_modules.train import run
from tests.helpers.runs import REPO, metric_history, mlflow_client, tiny_overrides


class ManualSteps(CausalLMModule):
    """The training step as it was: Lightning's manual optimization, the module stepping the optimizer."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx: int):
        optimizer = self.optimizers()
        optimizer.zero_grad()
        objective, loss, _ = self.training_objective(batch)
        self.manual_backward(objective)
        optimizer.step()
        self.lr_schedulers().step()
        self.log("train/loss", loss)
        return objective.detach()


def _folder_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_checkpoint_of_manual_optimization_is_refused_before_anything_changes(runs_dir: Path, monkeypatch) -> None:
    # No clipping: Lightning refuses the Trainer's clip in manual optimization.
    overrides = tiny_overrides(runs_dir, steps=20, **{"optim.grad_clip": "0"})
    with monkeypatch.context() as patched:
        patched.setattr(build, "CausalLMModule", ManualSteps)
        first = run(compose_run_config([*overrides, "trainer.stop_after_steps=10"]))
    assert first.status == "KILLED"
    client = mlflow_client(runs_dir)
    folder = Path(client.get_run(first.run_id).data.tags[tags.CHECKPOINT_DIR])
    files, losses = _folder_bytes(folder), metric_history(client, first.run_id, "train/loss")
    assert losses[-1][0] == 9

    resume = [*overrides, f"resume={first.run_id}"]
    with pytest.raises(ConfigError) as refused:
        run(compose_run_config(resume), cli_overrides=[f"resume={first.run_id}"])
    message = str(refused.value)
    assert "manual optimization, 10 steps" in message and "without resume=" in message and "\n" not in message
    assert client.get_run(first.run_id).info.status == "KILLED"
    assert metric_history(client, first.run_id, "train/loss") == losses
    assert _folder_bytes(folder) == files

    cli = subprocess.run([sys.executable, "-m", "lit_modules.train", *resume], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert cli.returncode == 2, cli.stderr[-2000:]
    errors = [line for line in cli.stderr.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {message}"]
    assert client.get_run(first.run_id).info.status == "KILLED"
