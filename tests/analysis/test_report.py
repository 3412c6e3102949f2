"""A full report from a hand-made store whose answers are known: verdicts, tables, every figure, MLflow.

The store imitates a PC-layer ablation (4 arms x 3 seeds) that logged every kind of metric the report
draws: loss curves, GMCN, MoLS SNR/alpha, WISCA ratios, init std, condensation, stable rank, attention
sink, pseudo-rank, throughput, an eval accuracy, fine-tune runs, token log-probabilities and the runs'
own singular-value histograms. Known answers: `adamw_pc4` reaches the baseline's final loss in about
half the tokens on every seed (speedup ~2x, reproduced); `muon_pc2` equals `muon_baseline` on
every seed (no detectable effect, said so); a KILLED duplicate cell is listed but not counted.
"""

import math
import shutil
import re
import time
import warnings

import matplotlib.image
import numpy as np
import pandas as pd
import pytest
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient

from analysis.verdict import NO_CLAIM, NO_DETECTABLE, REPRODUCED
from analysis.report import main, write_report
from analysis.sweep_report import write_sweep_report
from lit_modules.tracking.init_stds import init_std_params
from lit_modules.tracking.run_lifecycle import open_run
from lit_modules.tracking.store import get_or_create_experiment, tracking_uri

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ARMS = {  # arm: (speed of the loss decay, weight decay, gmcn scale, tokens/s)
    "adamw_baseline": (1.0, 0.1, 1.0, 1000.0),
    "adamw_pc4": (2.0, 0.3, 0.6, 900.0),
    "muon_baseline": (1.0, 0.0, 1.0, 1000.0),
    "muon_pc2": (1.0, 0.0, 1.0, 1000.0),
}
SEEDS = (0, 1, 2)
STEPS = 10
PER_STEP = 100


def _log(client, run_id, points):
    now = int(time.time() * 1000)
    metrics = [Metric(k, float(v), now, int(s)) for k, s, v in points]
    for start in range(0, len(metrics), 900):
        client.log_batch(run_id, metrics=metrics[start:start + 900], synchronous=True)


def _loss(speed, tokens, seed):
    return 1.0 + 3.0 * math.exp(-speed * (1 + 0.01 * seed) * tokens / 400.0) + 0.001 * seed


def _child(client, exp, parent, arm, seed, tmp, status="FINISHED"):
    speed, wd, gmcn, tps = ARMS[arm]
    tags = {"seed": str(seed), "ablation.name": "pc_layer", "ablation.arm": arm, "git_commit": "abc1234",
            "git_dirty": "false", "end_reason": "completed" if status == "FINISHED" else "interrupted"}
    params = {"ablation.baseline": "adamw_baseline", "budget.tokens_per_step": str(PER_STEP),
              "budget.total_tokens": str(PER_STEP * STEPS), "budget.steps": str(STEPS),
              "budget.params_non_embedding": "5000", "model.name": "synthetic", "optim.weight_decay": str(wd),
              "regime.name": "steps", "regime.tokens_per_param": "None"}
    matrices = ["layers.0.attn.q_proj.weight", "layers.1.attn.q_proj.weight", "tok_emb.weight"]
    if arm == "adamw_pc4":
        matrices.append("layers.0.attn.gate_proj.weight")  # a matrix the other arms lack (a gated arm)
    params.update(init_std_params({name: 0.02 * (1 + 0.1 * seed) for name in matrices}))
    run_id = open_run(client, exp, None, tags, params, parent_run_id=parent)
    points = []
    for step in range(1, STEPS, 2):
        tokens = (step + 1) * PER_STEP
        points.append(("val/loss", step, _loss(speed, tokens, seed)))
        points.append(("val/bits_per_byte", step, 1.4 * _loss(speed, tokens, seed)))
        points.append(("train/loss", step, _loss(speed, tokens, seed) + 0.05))
        points.append(("tokens_per_s", step, tps * (1 + 0.01 * seed)))
        points.append(("step_time_s", step, PER_STEP / tps))
        points.append(("mols/lr_scale/qk", step, min(1.0, step / 5)))
        for g, f in (("all", 1.0), ("pc", 0.8), ("no_pc", 1.2), ("kind/o", 0.9), ("kind/up", 1.1)):
            points.append((f"diag/gmcn/{g}", step, f * gmcn * (50 - step) * (1 + 0.01 * seed)))
        points.append(("diag/stable_rank/mean/qk", step, 5 + step * 0.1))
        points.append(("diag/condensation/mean_abs_cos/mean/qk", step, 0.5 - 0.02 * step))
        points.append(("diag/attention_sink/mean", step, 0.2 + 0.01 * step))
        points.append(("diag/attention_sink/max_head", step, 0.5 + 0.01 * step))
        for layer in (0, 1):
            points.append((f"wisca/layer{layer}/qk_l1_ratio", step, 1.0 + 0.1 * layer + 0.01 * step))
        points.append(("wisca/transitions", step, step // 2))
    for g, snr in (("emb", 0.01), ("qk", 0.1), ("mlp", 1.0)):
        points.append((f"mols/snr/{g}", 0, snr))
        points.append((f"mols/alpha/{g}", 0, math.sqrt(1.0 / snr)))
    points.append(("diag/pseudo_rank/qk", STEPS - 1, 8 - 10 * wd))
    points.append(("eval/local_cloze/acc", STEPS - 1, 0.3 + (0.05 if arm == "adamw_pc4" else 0.0) + 0.001 * seed))
    _log(client, run_id, points)
    if seed == 0 and status == "FINISHED":
        rng = np.random.default_rng(ARMS[arm][0].__hash__() % 1000)
        npz = tmp / f"{arm}_logprobs" / "token_logprobs.npz"
        npz.parent.mkdir(parents=True)
        np.savez(npz, tokens=np.arange(200, dtype=np.int32) % 17,
                 logprobs=(-rng.uniform(0.01, 5.0, 200)).astype(np.float32))
        client.log_artifact(run_id, str(npz), artifact_path="eval")
        png = tmp / f"{arm}_sv" / "sv_hist_step0000009.png"
        png.parent.mkdir(parents=True)
        matplotlib.image.imsave(png, np.random.default_rng(0).random((8, 8)))
        client.log_artifact(run_id, str(png), artifact_path="diagnostics/step_0000009")
    client.set_terminated(run_id, status)
    if status == "FINISHED":
        ft = open_run(client, exp, None, {"finetune.base_run_id": run_id}, {"optim.weight_decay": str(wd)})
        _log(client, ft, [("eval/sft/acc", 0, 0.4 + wd / 2 + 0.001 * seed)])
        client.set_terminated(ft, "FINISHED")
    return run_id


@pytest.fixture(scope="module")
def ablation_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("synthetic")
    runs_dir = tmp / "runs"
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    exp = get_or_create_experiment(client, "default", str(runs_dir))
    parent = open_run(client, exp, "ablate:pc_layer", {"ablation.name": "pc_layer", "ablation.role": "parent"},
                      {"arms": ",".join(f"pc_layer/{a}" for a in ARMS), "seeds": "0,1,2"})
    _child(client, exp, parent, "adamw_pc4", 0, tmp, status="KILLED")  # an interrupted first attempt
    for arm in ARMS:
        for seed in SEEDS:
            _child(client, exp, parent, arm, seed, tmp)
    client.set_terminated(parent, "FINISHED")
    return runs_dir, parent, tmp


@pytest.fixture(scope="module")
def report(ablation_store):
    runs_dir, parent, tmp = ablation_store
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # e.g. numpy's "Mean of empty slice" on a missing matrix
        path = write_report(parent_run_id=parent, runs_dir=str(runs_dir), reports_dir=tmp / "reports")
    return path, path.read_text()


def assert_valid_pngs(report_path, text):
    """Every image the report names exists, starts with the PNG signature and matplotlib reads it."""
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert images
    for name in images:
        path = report_path.parent / name
        assert path.is_file(), f"{name} is named in the report but missing"
        assert path.read_bytes()[:8] == PNG_SIGNATURE, name
        assert matplotlib.image.imread(path).ndim == 3, name
    return images


def test_report_names_only_valid_pngs_and_every_figure_kind(report):
    path, text = report
    assert path.name == "report.md" and path.parent.name == "pc_layer"
    images = set(assert_valid_pngs(path, text))
    for expected in ("loss_vs_tokens.png", "effects_val_loss.png", "gmcn.png", "gmcn_by_kind.png",
                     "mols_snr_alpha.png", "mols_lr_scale.png", "init_std.png", "condensation.png",
                     "stable_rank.png", "attention_sink.png", "wisca_ratios.png", "vs_weight_decay.png",
                     "token_gap_adamw_pc4.png", "sv_hist_adamw_baseline.png"):
        assert expected in images, expected


def test_verdicts_follow_the_known_answers(report):
    _, text = report
    lines = [line for line in text.splitlines() if line.startswith(("- Primary:", "- Secondary:"))]
    by_key = {re.match(r"- \w+: `(\w+)` vs `(\w+)` on `([^`]+)`", line).groups(): line for line in lines}
    speed = by_key[("adamw_pc4", "adamw_baseline", "speedup")]
    assert f"**{REPRODUCED}**" in speed
    assert f"**{REPRODUCED}**" in by_key[("adamw_pc4", "adamw_baseline", "diag/gmcn/all")]
    muon = by_key[("muon_pc2", "muon_baseline", "speedup")]
    assert f"**{NO_DETECTABLE}**" in muon and "equals its reference on every seed" in muon
    assert f"**{NO_CLAIM}**" in by_key[("muon_baseline", "adamw_baseline", "val/loss")]
    assert "below matched scale" in speed and "0.2 TPP" in speed


def test_tables_state_seeds_speedup_noise_and_overhead(report):
    path, text = report
    assert "The paper's claim" in text and "1.63x" in text
    assert "Seeds (finished runs per arm): `adamw_baseline`: 0,1,2" in text
    assert "1 KILLED" in text and "12 FINISHED" in text
    speed = pd.read_csv(path.parent / "speedup.csv").set_index("arm")
    assert 1.7 < speed.loc["adamw_pc4", "speedup"] < 2.2  # half the tokens, up to linear interpolation
    assert speed.loc["adamw_pc4", "n"] == 3 and speed.loc["adamw_pc4", "not_reached"] == 0
    overhead = pd.read_csv(path.parent / "overhead.csv").set_index("arm")
    assert overhead.loc["adamw_pc4", "ratio"] == pytest.approx(1000 / 900, rel=1e-6)  # 10% fewer tokens/s
    assert overhead.loc["muon_pc2", "reference"] == "muon_baseline"
    assert "Seed noise of the references: seed sd and MDD" in text and "Token-level gap" in text


def test_per_arm_table_has_the_known_means_and_sample_sd(report):
    path, text = report
    summary = pd.read_csv(path.parent / "arm_summary.csv")
    assert "Per arm: mean ± sd over seeds" in text
    for arm, (speed, *_rest) in ARMS.items():
        # val/loss: the value logged at the last step; train loss: the mean of the 5 logged train/loss values.
        val = [_loss(speed, STEPS * PER_STEP, seed) for seed in SEEDS]
        train = [np.mean([_loss(speed, (step + 1) * PER_STEP, seed) + 0.05 for step in range(1, STEPS, 2)])
                 for seed in SEEDS]
        for metric, values in (("val/loss", val), ("train/loss (last 5 logged)", train)):
            row = summary[(summary["metric"] == metric) & (summary["arm"] == arm)].iloc[0]
            assert row["n"] == 3 and row["seeds"] == "0,1,2"  # the KILLED duplicate of adamw_pc4 is not counted
            assert row["mean"] == pytest.approx(np.mean(values), rel=1e-9)
            assert row["sd"] == pytest.approx(np.std(values, ddof=1), rel=1e-6)
            assert (row["min"], row["max"]) == (pytest.approx(min(values)), pytest.approx(max(values)))


def test_report_is_logged_to_the_parent_run(ablation_store, report):
    runs_dir, parent, _ = ablation_store
    report_path, report_text = report
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    names = {a.path for a in client.list_artifacts(parent, "report")}
    assert {"report/report.md", "report/report.html", "report/loss_vs_tokens.png"} <= names
    html = (report_path.parent / "report.html").read_text()
    figures = [line for line in report_text.splitlines() if line.startswith("![")]
    assert html.count('src="data:image/png;base64,') == len(figures) > 5  # every figure inside the page
    assert len(html) < 5_000_000  # a page a browser loads at once


def test_cli_resolves_the_preset_name_and_rewrites_the_report(ablation_store, tmp_path, capsys):
    runs_dir, _, _ = ablation_store
    code = main(["EXP=pc_layer", f"runs_dir={runs_dir}", f"reports_dir={tmp_path}", "log=false"])
    assert code == 0
    assert (tmp_path / "pc_layer" / "report.md").is_file()
    assert "report:" in capsys.readouterr().out
    assert main(["EXP=no_such_thing", f"runs_dir={runs_dir}", f"reports_dir={tmp_path}"]) == 2
    assert main(["bogus"]) == 2


def test_sweep_report_lists_best_trials_and_embeds_the_summary(tmp_path):
    runs_dir = tmp_path / "runs"
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    exp = get_or_create_experiment(client, "sweeps", str(runs_dir))
    parent = open_run(client, exp, "sweep:toy", {"sweep.study": "toy", "sweep.role": "parent"},
                      {"sweep.metric": "val/loss", "sweep.direction": "minimize", "space.optim.lr": "{...}"})
    for number, lr in enumerate((0.001, 0.008304419320076323, 0.1)):
        run_id = open_run(client, exp, f"toy/trial-{number}",
                          {"sweep.study": "toy", "sweep.role": "trial", "sweep.trial_number": str(number),
                           "sweep.trial_state": "COMPLETE"},
                          {"optim.lr": str(lr), "budget.tokens_per_step": "100"}, parent_run_id=parent)
        _log(client, run_id, [("val/loss", s, 3.0 - s * 0.1 - abs(math.log10(lr) + 2) * -0.2) for s in (4, 9)])
        client.set_terminated(run_id, "FINISHED")
    summary = tmp_path / "summary"
    summary.mkdir()
    (summary / "summary.md").write_text("# Sweep `toy`\n\n![history](optimization_history.png)\n")
    matplotlib.image.imsave(summary / "optimization_history.png", np.zeros((4, 4)))
    client.log_artifacts(parent, str(summary), artifact_path="summary")
    client.set_terminated(parent, "FINISHED")

    path = write_sweep_report(parent, str(runs_dir), reports_dir=tmp_path / "reports")
    text = path.read_text()
    assert path.parent.name == "toy"
    best = [line for line in text.splitlines() if line.startswith("| 1 |")]
    assert best and "| 0.0083 |" in best[0]  # lr 0.0083 has the lowest loss: 3 significant digits
    assert "0.008304419" not in text  # the exact value is in best_trials.csv
    assert "0.008304419320076323" in (path.parent / "best_trials.csv").read_text()
    assert text.index("| 1 |") < text.index("| 0 |")
    assert "### Sweep `toy`" in text and "## Study summary\n" in text and "sweeps/summary.py" not in text
    assert_valid_pngs(path, text)
    html = (path.parent / "report.html").read_text()
    assert html.count('src="data:image/png;base64,') == 2  # the best trials' curves and the summary's history
    logged = {a.path for a in client.list_artifacts(parent, "report")}
    assert "report/report.html" in logged and "report/summary" not in logged  # the summary is logged once
    # write_report recognises a sweep parent too.
    assert write_report(parent, str(runs_dir), reports_dir=tmp_path / "again").name == "report.md"


def test_a_parent_without_finished_children_still_gets_a_report(tmp_path):
    runs_dir = tmp_path / "runs"
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    exp = get_or_create_experiment(client, "default", str(runs_dir))
    parent = open_run(client, exp, "ablate:wisca", {"ablation.name": "wisca", "ablation.role": "parent"},
                      {"arms": "wisca/origin,wisca/qk_vo_tensor"})
    failed = open_run(client, exp, None, {"seed": "0", "ablation.name": "wisca", "ablation.arm": "qk_vo_tensor",
                                          "end_reason": "RuntimeError: diverged"},
                      {"ablation.baseline": "origin"}, parent_run_id=parent)
    client.set_terminated(failed, "FAILED")
    client.set_terminated(parent, "FAILED")
    path = write_report(parent, str(runs_dir), reports_dir=tmp_path / "reports", log_to_mlflow=False)
    text = path.read_text()
    assert "No child run finished" in text and "1 FAILED" in text
    assert "RuntimeError: diverged" in text
    assert "+10.1%" in text  # the claim is still stated


# ---------------------------------------------------------------------------------------- exported results


def _tables(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv"))}


def test_export_then_report_from_the_files_alone_is_the_same_report(ablation_store, report, tmp_path, monkeypatch):
    from analysis.report import export_results, report_from_results
    from analysis.results_data import read_results_data
    from analysis.store_ablation import load_ablation
    from analysis.load_runs import RunStore

    runs_dir, parent, _ = ablation_store
    exported = export_results(parent, tmp_path / "results" / "pc_layer", runs_dir=str(runs_dir))
    store_path, store_text = report
    assert exported.read_text() == store_text  # export renders the very report write_report renders
    data = exported.parent / "data"
    assert {p.name for p in data.iterdir()} >= {"parent.json", "runs.csv", "curves.csv.gz", "finetune_runs.csv",
                                                "token_gaps.csv", "sv_hist.csv", "sv_hist"}

    # Same object both ways: frames equal to the bit, dtypes and seed order included.
    from_store = load_ablation(RunStore(runs_dir), RunStore(runs_dir).run(parent))
    from_files = read_results_data(exported.parent)
    for name in ("runs", "finished", "curves", "finetunes", "token_gaps"):
        pd.testing.assert_frame_equal(getattr(from_files, name), getattr(from_store, name), check_exact=True)
    assert from_files.arms == from_store.arms and from_files.parent == from_store.parent
    assert from_files.seeds() == from_store.seeds() == ["0", "1", "2"]
    assert from_files.sv_hists == from_store.sv_hists

    # No store reachable: the tables and the text come back byte for byte from data/ alone.
    copy = tmp_path / "copy"
    shutil.copytree(exported.parent, copy)
    for stale in copy.glob("*.*"):
        stale.unlink()  # keep data/ only: every output must be regenerated
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9/nowhere")
    again = report_from_results(copy)
    assert again.read_text() == store_text
    assert _tables(copy) == _tables(store_path.parent) and _tables(copy)
    assert set(assert_valid_pngs(again, again.read_text())) == set(assert_valid_pngs(store_path, store_text))


def test_report_cli_from_a_results_folder_and_its_errors(ablation_store, tmp_path, capsys, monkeypatch):
    from analysis.report import export_results

    runs_dir, parent, _ = ablation_store
    folder = tmp_path / "results" / "pc_layer"
    export_results(parent, folder, runs_dir=str(runs_dir))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9/nowhere")
    (folder / "report.md").unlink()
    assert main([f"FROM={folder}"]) == 0 and (folder / "report.md").is_file()
    assert main([f"FROM={tmp_path / 'empty'}"]) == 2
    assert "is not an exported results folder" in capsys.readouterr().err
    assert main([f"FROM={folder}", "EXP=pc_layer"]) == 2
    assert main(["FROM="]) == 2
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    shutil.rmtree(folder)
    assert main([f"EXPORT={folder}", "EXP=pc_layer", f"runs_dir={runs_dir}"]) == 0
    assert (folder / "data" / "runs.csv").is_file() and (folder / "report.md").is_file()
    assert main([f"EXPORT={tmp_path / 'other'}", "EXP=no_such_thing", f"runs_dir={runs_dir}"]) == 2
    assert not (tmp_path / "other").exists()  # nothing half-written for a name that resolves to no run


def test_a_new_report_removes_old_files_but_keeps_the_hand_written_findings(ablation_store, tmp_path):
    runs_dir, _, _ = ablation_store
    out = tmp_path / "pc_layer"
    out.mkdir()
    (out / "findings.md").write_text("our reading\n")
    (out / "old_plot.png").write_bytes(b"stale")
    main(["EXP=pc_layer", f"runs_dir={runs_dir}", f"reports_dir={tmp_path}", "log=false"])
    assert (out / "findings.md").read_text() == "our reading\n"
    assert not (out / "old_plot.png").exists() and (out / "report.md").is_file()


def test_the_model_line_reads_the_baseline_arm_not_a_median_over_every_rung() -> None:
    from pathlib import Path

    from analysis.report_context import ReportContext
    from analysis.report_sections import measured
    from analysis.claims import claim_for
    from tests.helpers.handmade_ablation import handmade

    values = {arm: [1.0, 1.1, 1.2] for arm in ("baseline", "arm", "baseline@x0.25", "arm@x0.25", "baseline@x0.5",
                                               "arm@x0.5")}
    ab = handmade(values, params={"x0.25": 25_000, "x0.5": 50_000})  # the headline rung: 100,000
    line = measured.section(ReportContext.of(ab, claim_for(ab.claim_key), Path("."))).body[0]
    assert "100,000 non-embedding parameters" in line and "medians over the baseline arm `baseline`" in line
    # A baseline no block ran (an ablation-only reference): the arms without a variant, the headline rung.
    ab = handmade({k: v for k, v in values.items() if k != "baseline"}, params={"x0.25": 25_000, "x0.5": 50_000})
    line = measured.section(ReportContext.of(ab, claim_for(ab.claim_key), Path("."))).body[0]
    assert "100,000 non-embedding parameters" in line and "medians over the arms without a variant" in line
