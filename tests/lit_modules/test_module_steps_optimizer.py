"""Without accumulation the module steps the optimizer itself (Lightning's manual optimization); it must train
exactly as Lightning's automatic loop does: the same hooks each step, the same clipping, the same values and
weights. And a checkpoint of the automatic loop resumes at its own step."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch

from lit_modules.bench.steps import MemoryLogger
from lit_modules.build import build_data, build_model, build_module, run_step_callbacks
from lit_modules.config.composition import compose_run_config
from lit_modules.config.validate import validated
from lit_modules.hook_profiler import NoProfiler

STEPS = 6
CLIP = 0.05  # the pre-clip norm is ~1 here: every step is clipped
STEP_HOOKS = ("on_train_batch_start", "on_before_zero_grad", "on_before_backward", "on_after_backward",
              "on_before_optimizer_step", "on_train_batch_end")


class HookLog(L.Callback):
    """Every per-step hook in order, with the global step and whether gradients are held at that moment."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, bool]] = []

    def __getattribute__(self, name: str):
        if name in STEP_HOOKS:
            def record(trainer, pl_module, *args, **kwargs):
                held = any(p.grad is not None for p in pl_module.parameters())
                self.calls.append((name, trainer.global_step, held))
            return record
        return super().__getattribute__(name)


def _fit(tmp: Path, automatic: bool, max_steps: int = STEPS, ckpt_path: Path | None = None, every: int = 1,
         extra: tuple[L.Callback, ...] = ()):
    checked = validated(compose_run_config([
        "regime=steps", f"trainer.max_steps={STEPS}", "data.seq_len=32", "data.batch_size=4",
        f"optim.grad_clip={CLIP}", f"trainer.log_every_n_steps={every}", "trainer.val_every_n_steps=100000",
        "trainer.num_threads=1", f"runs_dir={tmp}"]))
    cfg = checked.config
    data = build_data(cfg)
    model, _ = build_model(cfg, [])
    module = build_module(cfg, model, [], checked.budget, None)
    assert not module.automatic_optimization  # one batch a step: the module steps
    if automatic:
        module.automatic_optimization = True  # Lightning's loop, told of clipping by trainer_flags
    hooks, logger = HookLog(), MemoryLogger()
    trainer = L.Trainer(accelerator="cpu", devices=1, max_steps=max_steps, max_epochs=-1, limit_val_batches=0,
                        num_sanity_val_steps=0, logger=logger, log_every_n_steps=every, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, profiler=NoProfiler(),
                        callbacks=[*run_step_callbacks(cfg, checked.budget), hooks, *extra],
                        **module.trainer_flags())
    trainer.fit(module, datamodule=data.datamodule, ckpt_path=str(ckpt_path) if ckpt_path else None,
                weights_only=False if ckpt_path else None)
    return trainer, module, hooks, logger


def _values(logger: MemoryLogger) -> list:
    """What a run logs that depends on the seed alone (not throughput, not Lightning's epoch counter, which a
    checkpoint saved after `fit` returned has already advanced)."""
    return [(step, {k: v for k, v in row.items() if "per_s" not in k and "time" not in k and k != "epoch"})
            for step, row in logger.rows]


def test_the_module_steps_exactly_as_lightnings_automatic_loop(tmp_path):
    _, manual, manual_hooks, manual_log = _fit(tmp_path / "m", automatic=False)
    _, automatic, automatic_hooks, automatic_log = _fit(tmp_path / "a", automatic=True)
    assert automatic.trainer_flags() == {"gradient_clip_val": CLIP, "accumulate_grad_batches": 1}
    assert manual.trainer_flags() == {}
    assert _values(manual_log) == _values(automatic_log)  # losses, grad norms, learning rates, tokens
    assert any("train/grad_norm" in row and row["train/grad_norm"] > 10 * CLIP for _, row in manual_log.rows)
    for (name, a), b in zip(manual.state_dict().items(), automatic.state_dict().values()):
        assert torch.equal(a, b), name
    # The same hooks at the same steps; the only move: gradients are released before the forward, not after it.
    without_zero = [(n, s) for n, s, _ in manual_hooks.calls if n != "on_before_zero_grad"]
    assert without_zero == [(n, s) for n, s, _ in automatic_hooks.calls if n != "on_before_zero_grad"]
    for calls in (manual_hooks.calls, automatic_hooks.calls):
        assert [n for n, _, _ in calls].count("on_before_zero_grad") == STEPS
        assert all(held for n, _, held in calls if n in ("on_before_optimizer_step", "on_train_batch_end"))
    assert [n for n, _, _ in manual_hooks.calls[:3]] == ["on_train_batch_start", "on_before_zero_grad",
                                                          "on_before_backward"]


def test_a_checkpoint_of_the_automatic_loop_resumes_at_its_step(tmp_path):
    trainer, _, _, _ = _fit(tmp_path / "first", automatic=True, max_steps=3)
    checkpoint = tmp_path / "automatic.ckpt"
    trainer.save_checkpoint(checkpoint)
    resumed, resumed_module, hooks, resumed_log = _fit(tmp_path / "second", automatic=False, ckpt_path=checkpoint)
    _, whole, _, whole_log = _fit(tmp_path / "whole", automatic=False)
    assert resumed.global_step == STEPS
    assert [s for n, s, _ in hooks.calls if n == "on_train_batch_start"] == [3, 4, 5]
    assert _values(resumed_log) == [row for row in _values(whole_log) if row[0] >= 3]
    for (name, a), b in zip(resumed_module.state_dict().items(), whole.state_dict().values()):
        assert torch.equal(a, b), name


class PreClipNorms(L.Callback):
    """The gradient norm of every step before clipping (callbacks' hooks run before the module's)."""

    def __init__(self) -> None:
        self.norms: dict[int, float] = {}

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.norms[trainer.global_step] = float(torch.nn.utils.get_total_norm(grads, norm_type=2.0))


def test_the_grad_norm_is_logged_under_the_step_it_was_measured_at(tmp_path):
    for automatic in (False, True):
        norms = PreClipNorms()
        _, _, _, logger = _fit(tmp_path / str(automatic), automatic=automatic, every=3, extra=(norms,))
        logged = {step: row["train/grad_norm"] for step, row in logger.rows if "train/grad_norm" in row}
        assert logged == {2: norms.norms[2], 5: norms.norms[5]}  # with train/loss, every 3rd step
        assert len(set(norms.norms.values())) == STEPS  # each step's norm is its own
