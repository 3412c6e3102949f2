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


def _grid_with_finetunes():
    """Two lambdas x 2 seeds of one regime, each base fine-tuned with recipe h1, one base also with h0."""
    from analysis.ablation import ParentRecord, assemble, typed_runs
    from analysis.typed_tables import empty_token_gaps, typed_curves

    runs, curves, tunes = [], [], []
    for i, (arm, wd) in enumerate((("tpp20_wd0.1", "0.1"), ("tpp20_wd1.0", "1.0"))):
        for seed in range(2):
            run_id = f"{i}{seed}".ljust(32, "0")
            val = 2.0 + i * 0.1 + seed * 0.01
            runs.append({"run_id": run_id, "run_name": arm, "status": "FINISHED",
                         "start_time": pd.Timestamp("2026-01-01") + pd.Timedelta(seconds=len(runs)), "end_time": pd.NaT,
                         "params.regime.name": "tpp20", "params.optim.weight_decay": wd,
                         "params.budget.total_tokens": "1000", "tags.ablation.arm": arm, "tags.seed": str(seed),
                         "metrics.val/loss": val, "metrics.diag/attention_rank/qk/pseudo_rank_tau0.01": 8.0 - i,
                         "metrics.eval/probe/layer_0/acc": 0.5, "metrics.eval/probe/best_acc": 0.5})
            losses = [3.0, 2.9, 2.8, 2.7, 2.6, 2.5]  # the gap uses the last 5 logged values: mean 2.7
            curves.append(pd.DataFrame({"run_id": run_id, "key": "train/loss", "step": range(6),
                                        "tokens_seen": [100.0 * (s + 1) for s in range(6)], "value": losses}))
            for recipe, before in (("h1", 4.0), *((("h0", 9.0),) if run_id.startswith("00") else ())):
                offset = len(tunes) if recipe == "h1" else -1  # h0: an older recipe's fine-tune
                tunes.append({"run_id": f"f{recipe}{run_id}"[:32], "run_name": "ft", "status": "FINISHED",
                              "start_time": pd.Timestamp("2026-01-02") + pd.Timedelta(seconds=offset),
                              "end_time": pd.NaT, "tags.finetune.base_run_id": run_id,
                              "tags.finetune.recipe_hash": recipe, "tags.finetune.recipe": "python_docs",
                              "tags.finetune.target_data": "python_docs", "params.optim.lr": "0.001",
                              "params.optim.weight_decay": "0.0", "params.trainer.max_steps": "300",
                              "params.data.batch_size": "8", "params.schedule.name": "cosine",
                              "metrics.finetune/target_loss_before": before,
                              "metrics.finetune/target_loss_after": before - 0.5 - i * 0.1,
                              "metrics.finetune/plasticity": 0.5 + i * 0.1,
                              "metrics.eval/arithmetic/pass_at_4": 0.25 * (i + 1),
                              "metrics.eval/arithmetic/maj_at_4": 0.1 * i})
    parent = ParentRecord("f" * 32, "FINISHED", "ablate:wd_plasticity", {"ablation.name": "wd_plasticity"}, {}, "test")
    return assemble(parent, typed_runs(pd.DataFrame(runs)), typed_curves(pd.concat(curves, ignore_index=True)),
                    typed_runs(pd.DataFrame(tunes)), empty_token_gaps(), [])


def test_the_table_reads_an_ablation_and_picks_one_recipe_s_fine_tunes(tmp_path):
    from analysis.plasticity import plasticity_tables, recipes
    from analysis.report import render_report

    ab = _grid_with_finetunes()
    assert [r.hash for r in recipes(ab)] == ["h1", "h0"]  # newest recipe first
    table = plasticity_tables(ab, "h1")[0]
    rows = table.rows.set_index("run_id")
    assert list(rows["arm"]) == ["tpp20_wd0.1"] * 2 + ["tpp20_wd1.0"] * 2
    assert rows["target_before"].tolist() == [4.0] * 4  # h0's stale fine-tune (before 9.0) is not this recipe's
    assert rows["train_val_gap"].tolist() == pytest.approx([2.0 - 2.7, 2.01 - 2.7, 2.1 - 2.7, 2.11 - 2.7])
    assert rows["qk_pseudo_rank"].tolist() == [8.0, 8.0, 7.0, 7.0] and rows["probe_layer_0_acc"].eq(0.5).all()
    assert table.recipe.describe() == ("Fine-tuning recipe `python_docs`: target `python_docs`, lr 0.001, weight "
                                       "decay 0, 300 steps x batch 8, cosine schedule.")
    assert table.summary["plasticity_mean"].tolist() == pytest.approx([0.5, 0.6])
    # The fine-tunes' sampled metrics (eval.sampled) are columns of the rows and the summary.
    assert rows["sampled_arithmetic_pass_at_4"].tolist() == [0.25, 0.25, 0.5, 0.5]
    assert table.summary["sampled_arithmetic_maj_at_4_mean"].tolist() == pytest.approx([0.0, 0.1])
    # The report made from the same Ablation (as make report FROM= makes it) shows the table per recipe.
    text = render_report(ab, tmp_path / "report").read_text()
    assert "## Plasticity: base loss against the gain from one fine-tuning recipe" in text
    assert "### Recipe `python_docs` (h1)" in text and "| tpp20 | 0.1 | 2 | 1,000 |" in text
    assert (tmp_path / "report" / "plasticity_runs.csv").is_file()
