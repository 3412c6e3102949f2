"""The training step is Lightning's automatic optimization, told of clipping and accumulation by the Trainer
(`build.optimizer_step_flags`). It does what the module's docstring says, as a loop written by hand does it:
zero, forward, backward (a micro-batch's share under accumulation), clip, step, schedule; and the grad norm
is logged under the step it was measured at."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch

from lit_modules.bench.steps import MemoryLogger
from lit_modules.build import build_data, build_model, build_module, optimizer_step_flags, run_step_callbacks
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import Validated, validated
from lit_modules.hook_profiler import NoProfiler

STEPS = 6
CLIP = 0.05  # the pre-clip norm is ~1 here: every step is clipped


def _checked(tmp: Path, *extra: str) -> Validated:
    return validated(compose_run_config([
        "regime=steps", f"trainer.max_steps={STEPS}", "data.seq_len=32", "data.batch_size=4",
        f"optim.grad_clip={CLIP}", "trainer.log_every_n_steps=1", "trainer.val_every_n_steps=100000",
        "trainer.num_threads=1", f"runs_dir={tmp}", *extra]))


class Batches(L.Callback):
    """A copy of every micro-batch the fit trains on, in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.seen.append(tuple(t.clone() for t in batch))


def _fit(checked: Validated, *extra: L.Callback):
    cfg = checked.config
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    module = build_module(cfg, model, [], checked.budget, None)
    logger = MemoryLogger()
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=STEPS, max_epochs=-1, limit_val_batches=0,
                        num_sanity_val_steps=0, logger=logger, log_every_n_steps=cfg.trainer.log_every_n_steps,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        profiler=NoProfiler(), callbacks=[*run_step_callbacks(cfg, checked.budget), *extra],
                        **optimizer_step_flags(cfg))
    trainer.fit(module, datamodule=data.datamodule)
    return module, logger


def test_the_trainer_is_told_the_configs_clipping_and_accumulation(tmp_path: Path) -> None:
    clipped = _checked(tmp_path, "trainer.accumulate_grad_batches=2").config
    assert optimizer_step_flags(clipped) == {"gradient_clip_val": CLIP, "accumulate_grad_batches": 2}
    unclipped = _checked(tmp_path, "optim.grad_clip=0").config
    assert optimizer_step_flags(unclipped) == {"gradient_clip_val": None, "accumulate_grad_batches": 1}


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_step_is_what_a_loop_by_hand_does(tmp_path: Path, accumulate: int) -> None:
    checked = _checked(tmp_path, f"trainer.accumulate_grad_batches={accumulate}")
    batches = Batches()
    trained, logger = _fit(checked, batches)
    assert len(batches.seen) == STEPS * accumulate

    model, _ = build_model(checked.config, [])  # the same initial weights (seeded by the config)
    by_hand = build_module(checked.config, model, [], checked.budget, None)
    configured = by_hand.configure_optimizers()
    optimizer, schedule = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    losses, norms = [], []
    for index, batch in enumerate(batches.seen):
        if index % accumulate == 0:
            optimizer.zero_grad()
        objective, loss, _ = by_hand.training_objective(batch)
        (objective / accumulate).backward()
        if (index + 1) % accumulate:
            continue
        losses.append(float(loss.detach()))  # the step's last micro-batch: what the logger writes under the step
        norms.append(float(torch.nn.utils.get_total_norm([p.grad for p in model.parameters()], norm_type=2.0)))
        torch.nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], CLIP)
        optimizer.step()
        schedule.step()

    logged = {step: row for step, row in logger.rows if "train/loss" in row}
    assert sorted(logged) == list(range(STEPS))
    assert [logged[s]["train/loss"] for s in range(STEPS)] == losses
    assert [logged[s]["train/grad_norm"] for s in range(STEPS)] == norms
    assert min(norms) > 10 * CLIP  # every step was clipped
    for (name, a), b in zip(trained.state_dict().items(), by_hand.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


class PreClipNorms(L.Callback):
    """The gradient norm of every step before clipping (callbacks' hooks run before the module's)."""

    def __init__(self) -> None:
        self.norms: dict[int, float] = {}

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.norms[trainer.global_step] = float(torch.nn.utils.get_total_norm(grads, norm_type=2.0))


def test_the_grad_norm_is_logged_under_the_step_it_was_measured_at(tmp_path: Path) -> None:
    norms = PreClipNorms()
    _, logger = _fit(_checked(tmp_path, "trainer.log_every_n_steps=3"), norms)
    logged = {step: row["train/grad_norm"] for step, row in logger.rows if "train/grad_norm" in row}
    assert logged == {2: norms.norms[2], 5: norms.norms[5]}  # with train/loss, every 3rd step
    assert len(set(norms.norms.values())) == STEPS  # each step's norm is its own
