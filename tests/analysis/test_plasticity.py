"""The plasticity table: mean and sd over seeds, and the decoupling statement on known numbers."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.plasticity import decoupling, summarize


def rows(cells: dict[float, list[tuple[float, float]]], regime: str = "tpp20") -> pd.DataFrame:
    """{lambda: [(base val loss, plasticity) per seed]} -> the per-run frame the table aggregates."""
    out = []
    for wd, seeds in cells.items():
        for seed, (loss, plastic) in enumerate(seeds):
            out.append({"regime": regime, "weight_decay": wd, "seed": str(seed), "tokens": 100.0,
                        "base_val_loss": loss, "plasticity": plastic, "target_before": 3.0,
                        "target_after": 3.0 - plastic, "train_val_gap": 0.1, "qk_pseudo_rank": 16.0,
                        "ov_pseudo_rank": 15.0, "probe_best_acc": float("nan")})
    return pd.DataFrame(out)


def test_summary_is_mean_and_sample_sd_over_seeds():
    s = summarize(rows({0.1: [(2.0, 0.1), (2.2, 0.3)], 1.0: [(2.5, 0.5)]}))
    first = s[s["weight_decay"] == 0.1].iloc[0]
    assert first["n_seeds"] == 2
    assert first["base_val_loss_mean"] == pytest.approx(2.1)
    assert first["base_val_loss_sd"] == pytest.approx(0.1414213562)  # sample sd of 2.0, 2.2
    assert first["target_after_mean"] == pytest.approx(2.8)
    assert pd.isna(s[s["weight_decay"] == 1.0].iloc[0]["plasticity_sd"])  # one seed: no sd
    assert pd.isna(first["probe_best_acc_mean"])


def test_decoupling_statements_on_known_numbers():
    # rows(): target loss after = 3.0 - plasticity, so "most plastic" and "lowest loss after" coincide here.
    separated = decoupling(summarize(rows({0.1: [(2.00, 0.10), (2.01, 0.11)], 1.0: [(2.10, 0.30), (2.11, 0.31)]})))
    assert len(separated) == 2  # one line per downstream measure
    assert "lambda 0.1 has the lowest base val/loss, lambda 1 the most plasticity" in separated[0]
    assert "they DIFFER" in separated[0] and "base loss +0.1000, plasticity +0.2000" in separated[0]
    assert "do not overlap" in separated[0] and "a small-n observation" in separated[0]
    assert "lambda 1 the lowest target loss after" in separated[1] and "target_after -0.2000" in separated[1]
    # Paired by seed: seed s of lambda 1.0 minus seed s of lambda 0.1. Base loss +0.10, +0.10, +0.10 (sd 0)
    # is not testable by t; with a spread, both shifts consistent across 3 seeds are significant.
    cells = {0.1: [(2.00, 0.10), (2.02, 0.12), (2.04, 0.11)], 1.0: [(2.10, 0.30), (2.13, 0.33), (2.14, 0.31)]}
    paired = decoupling(summarize(rows(cells)), rows(cells))
    assert "Paired by seed (n = 3), lambda 1 - lambda 0.1: base_val_loss +0.1033" in paired[0]
    assert "both differences are significant" in paired[0] and "decoupling at this scale" in paired[0]
    cells[1.0][2] = (2.03, 0.05)  # one seed reverses both: neither difference is significant any more
    assert "not both significant" in decoupling(summarize(rows(cells)), rows(cells))[0]
    noisy = decoupling(summarize(rows({0.1: [(2.00, 0.10), (2.20, 0.40)], 1.0: [(2.10, 0.30), (2.11, 0.31)]})))
    assert "within seed noise: not evidence of decoupling" in noisy[0]
    same = decoupling(summarize(rows({0.1: [(2.0, 0.5)], 1.0: [(2.1, 0.3)]})))
    assert "same lambda (0.1)" in same[0] and "no decoupling seen" in same[0]
    single = decoupling(summarize(rows({0.1: [(2.0, 0.1)], 1.0: [(2.1, 0.3)]})))
    assert "seed spread is unknown" in single[0]
    lonely = decoupling(summarize(rows({0.1: [(2.0, 0.1)]})))
    assert "fewer than two lambdas" in lonely[0]
    two_regimes = pd.concat([rows({0.1: [(2.0, 0.1)], 1.0: [(2.1, 0.3)]}, "tpp20"),
                             rows({0.1: [(1.9, 0.3)], 1.0: [(2.0, 0.1)]}, "tpp140")])
    lines = decoupling(summarize(two_regimes))
    assert [line.split(":")[0] for line in lines] == ["- tpp140"] * 2 + ["- tpp20"] * 2
    assert "same lambda (0.1)" in lines[0] and "they DIFFER" in lines[2]
