"""z-loss: the term on known logits, the diagnostic on a known normalizer, coef = 0 training exactly as the
baseline, a real run logging the term, and the preset's cells composing and running."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from lit_modules.config.composition import compose_run_config
from lit_modules.config.errors import ConfigError
from lit_modules.config.validate import validate
from lit_modules.diagnostics import REGISTRY, DiagnosticContext
from lit_modules.techniques.z_loss import ZLoss
from lit_modules.techniques.z_loss.normalizer import z_loss
from lit_modules.train import run
from tests.helpers.runs import metric_history, mlflow_client, tiny_overrides


def test_the_term_is_coef_times_mean_squared_log_normalizer_over_target_positions():
    vocab = 8
    logits = torch.zeros(1, 3, vocab)  # log Z = log 8 at every position
    logits[0, 1] = torch.log(torch.tensor([4.0] + [0.0] * (vocab - 1)).clamp_min(1e-30))  # log Z = log 4
    targets = torch.tensor([[1, 2, -100]])  # the third position is masked (an SFT prompt token)
    expected = 1e-4 * (math.log(8) ** 2 + math.log(4) ** 2) / 2
    assert z_loss(logits, targets, 1e-4).item() == pytest.approx(expected, rel=1e-6)
    assert ZLoss(coef=1e-4).loss_terms(logits, (None, targets))["z_loss"].item() == pytest.approx(expected, rel=1e-6)
    nothing = z_loss(logits.requires_grad_(), torch.full((1, 3), -100), 1e-4)
    assert nothing.item() == 0.0 and nothing.requires_grad  # no target: a zero that still backpropagates


def test_the_diagnostic_reads_log_z_of_held_out_logits():
    class Constant(nn.Module):
        def forward(self, idx):  # uniform over 16 tokens: log Z = log 16 everywhere
            return torch.zeros(*idx.shape, 16)

    result = REGISTRY["logit_normalizer"](DiagnosticContext(Constant(), torch.zeros(2, 5, dtype=torch.long), 0, Path(".")))
    log16 = math.log(16)
    assert result.metrics["logit_normalizer/mean"] == pytest.approx(log16)
    assert result.metrics["logit_normalizer/rms"] == pytest.approx(log16)
    assert result.metrics["logit_normalizer/max_abs"] == pytest.approx(log16)


def test_bad_coefficients_are_refused_in_one_sentence():
    for coef in ("-1", "nan"):
        with pytest.raises(ConfigError, match="techniques.z_loss.coef must be a finite number >= 0"):
            validate(compose_run_config(["z_loss=default", f"techniques.z_loss.coef={coef}"]))


def test_a_run_logs_the_term_and_coef_zero_trains_exactly_as_the_baseline(tmp_path):
    def cell(name: str, *extra: str):
        overrides = tiny_overrides(tmp_path / name, steps=10, **{"trainer.log_every_n_steps": "2",
                                                                  "trainer.num_threads": "1"})
        result = run(compose_run_config([*overrides, *extra]))
        assert result.status == "FINISHED"
        return result.run_id

    base, zero = cell("base"), cell("zero", "z_loss=default", "techniques.z_loss.coef=0")
    term = cell("term", "z_loss=default")
    # The hook adds 0 x the term: the objective, every gradient and so every logged loss stay the baseline's.
    for key in ("train/loss", "val/loss"):
        assert metric_history(tmp_path / "zero", zero, key) == metric_history(tmp_path / "base", base, key)
    logged = metric_history(tmp_path / "term", term, "train/z_loss")
    train_steps = [step for step, _ in metric_history(tmp_path / "term", term, "train/loss")]
    assert [step for step, _ in logged] == train_steps and len(logged) == 5 and all(v > 0 for _, v in logged)
    record = mlflow_client(tmp_path / "term").get_run(term).data
    # Near-uniform logits at the start: log Z ~ log(vocab), so the first term is ~ 1e-4 x log(vocab)^2.
    vocab = int(record.params["model.vocab_size"])
    assert logged[0][1] == pytest.approx(1e-4 * math.log(vocab) ** 2, rel=0.5)
    assert record.tags["z_loss.coef"] == "0.0001"


def test_the_preset_composes_both_arms_and_runs_one_cell(tmp_path):
    for arm in ("baseline", "z_loss"):
        cfg = validate(compose_run_config(["experiment=z_loss", f"+arm=z_loss/{arm}"]))
        assert cfg.ablation.arm == arm and list(cfg.diagnostics.names) == ["logit_normalizer"]
        assert (cfg.techniques.get("z_loss") is not None) == (arm == "z_loss")
    cell = run(compose_run_config(["experiment=z_loss", "+arm=z_loss/z_loss", "seed=0", "trainer.max_steps=10",
                                   "trainer.val_every_n_steps=5", "diagnostics.every_n_steps=5",
                                   f"runs_dir={tmp_path}"]))
    assert cell.status == "FINISHED"
    metrics = mlflow_client(tmp_path).get_run(cell.run_id).data.metrics
    assert {"train/z_loss", "val/loss", "diag/logit_normalizer/rms"} <= set(metrics)
