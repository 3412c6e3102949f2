"""A real small ablation (CPU-tiny model, 20 steps, two model rungs x 2 arms x 3 seeds, a real MLflow store)
exported to a results folder and reported again from the files alone, with no store reachable."""

import json
import shutil

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.load_runs import RunStore
from analysis.provenance import provenance_record
from analysis.report import export_results, report_from_results, write_report
from analysis.results_data import read_results_data, write_results_data
from analysis.store_ablation import load_ablation
from lit_modules.tracking.store import tracking_uri
from lit_modules.train import run
from sweeps.ablate import open_parent, parse_args, read_grid, validate_cells
from lit_modules.config.composition import compose_run_config

SEEDS = ("0", "1", "2")
WIDE = ["model.d_model=128"]  # the `x2` rung: twice the width of model=tiny


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("real_ablation")
    runs_dir = tmp / "runs"
    grid = parse_args(["experiment=smoke", f"runs_dir={runs_dir}", "trainer.max_steps=20"])
    read_grid(grid)
    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    parent = open_parent(client, grid, validate_cells(grid))
    for variant, extra in (("", []), ("x2", WIDE)):
        for arm in grid.arms:  # smoke/baseline, smoke/no_decay
            name = arm.rsplit("/", 1)[-1]
            for seed in SEEDS:
                overrides = [f"experiment=smoke", f"+arm={arm}", f"seed={seed}", f"parent_run_id={parent}",
                             *grid.overrides, *extra]
                if variant:
                    overrides.append(f"ablation.arm={name}@{variant}")
                assert run(compose_run_config(overrides)).status == "FINISHED"
    client.set_terminated(parent, "FINISHED")
    return runs_dir, parent, tmp


@pytest.fixture(scope="module")
def exported(ablation):
    runs_dir, parent, tmp = ablation
    record = provenance_record(command="pytest tests/test_results_export.py", wall_time_s=12.5, workers=1,
                               threads_per_worker=1, date="2026-01-02T03:04:05+00:00")
    return export_results(parent, tmp / "results" / "smoke", runs_dir=str(runs_dir), provenance=record)


def test_the_report_from_the_csv_files_is_the_report_from_the_store(ablation, exported, tmp_path, monkeypatch):
    runs_dir, parent, _ = ablation
    folder = exported.parent
    copy = tmp_path / "smoke"
    shutil.copytree(folder / "data", copy / "data")
    shutil.copy(folder / "provenance.json", copy / "provenance.json")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9/no-store-here")
    again = report_from_results(copy)
    text = exported.read_text()
    assert again.read_text() == text
    tables = sorted(p.name for p in folder.glob("*.csv"))
    assert {"verdicts.csv", "effects.csv", "scale.csv", "seed_noise.csv", "runs.csv"} <= set(tables)
    for name in tables:
        assert (copy / name).read_bytes() == (folder / name).read_bytes(), name
    # The HTML copy (figures embedded) is regenerated identically from the files too.
    assert (copy / "report.html").read_text() == (folder / "report.html").read_text()
    # Without provenance, the store's own report (write_report) is the same text too.
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    plain = write_report(parent, str(runs_dir), reports_dir=tmp_path / "reports", log_to_mlflow=False)
    (copy / "provenance.json").unlink()
    assert report_from_results(copy).read_text() == plain.read_text()


def test_frames_round_trip_exactly(ablation, exported):
    runs_dir, parent, _ = ablation
    store = RunStore(runs_dir)
    from_store = load_ablation(store, store.run(parent))
    from_files = read_results_data(exported.parent)
    for name in ("runs", "finished", "curves", "finetunes", "token_gaps"):
        pd.testing.assert_frame_equal(getattr(from_files, name), getattr(from_store, name), check_exact=True)
    assert from_files.arms == from_store.arms == ["baseline", "no_decay", "baseline@x2", "no_decay@x2"]
    assert from_files.seeds() == list(SEEDS) and from_files.parent == from_store.parent
    runs = from_files.runs
    assert len(runs) == 12 and runs["tags.config_hash"].str.len().eq(16).all()
    for col in ("params.budget.params_total", "params.budget.params_non_embedding", "params.budget.tokens_per_param",
                "tags.git_commit", "metrics.val/loss", "derived.seconds_per_token"):
        assert runs[col].notna().all(), col
    assert not any(c.startswith("tags.pkg.") or c == "params.model.d_model" for c in runs)  # unused: not exported


def test_the_header_states_scale_per_variant_and_the_provenance(exported):
    text = exported.read_text()
    scale = pd.read_csv(exported.parent / "scale.csv").set_index("arm")
    tiny, wide = scale.loc["baseline"], scale.loc["baseline@x2"]
    assert tiny["params_non_embedding"] == 106_816 and wide["params_non_embedding"] > 2 * tiny["params_non_embedding"]
    assert tiny["tpp"] == pytest.approx(20 * 512 / 106_816)  # 20 steps x 512 tokens
    assert (scale["seeds"] == 3).all() and scale.loc["no_decay@x2", "variant"] == "x2"
    assert "**Provenance:** commit `" in text and "2026-01-02T03:04:05+00:00" in text and "12 s" in text
    verdicts = pd.read_csv(exported.parent / "verdicts.csv").set_index("arm")
    # Each rung is compared within itself; its scale comes from its own runs.
    assert verdicts.loc["no_decay@x2", "reference"] == "baseline@x2"
    assert verdicts.loc["no_decay@x2", "params_non_embedding"] == wide["params_non_embedding"]
    assert "variant `x2`" in verdicts.loc["no_decay@x2", "reason"]
    record = json.loads((exported.parent / "provenance.json").read_text())
    assert record["workers"] == 1 and record["threads_per_worker"] == 1 and record["machine"]["cpu_count"] >= 1


def test_a_failed_export_leaves_the_previous_one_untouched(ablation, exported, monkeypatch):
    import analysis.results_data as results_data

    folder = exported.parent
    before = {p.name: p.read_bytes() for p in (folder / "data").iterdir() if p.is_file()}
    ab = read_results_data(folder)
    real_write = results_data._write_csv

    def failing(frame, path):
        if path.name == results_data.CURVES_FILE:
            raise OSError("disk full")
        real_write(frame, path)

    monkeypatch.setattr(results_data, "_write_csv", failing)
    with pytest.raises(OSError):
        write_results_data(ab, folder)
    assert {p.name: p.read_bytes() for p in (folder / "data").iterdir() if p.is_file()} == before
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []


def test_the_ledger_reads_the_real_export_one_row_per_rung(exported, tmp_path):
    from analysis.ledger import write_ledger

    shutil.copytree(exported.parent, tmp_path / "results" / "smoke")
    refreshed: dict = {}
    text = write_ledger(tmp_path / "results", tmp_path / "RESULTS.md", refreshed).read_text()
    # A smoke run is far below any regime: the ledger names it as exploratory and prints none of its rows...
    assert "(`smoke/`): `no_decay` on `val/loss`: below its regime" in text
    assert not [line for line in text.splitlines() if line.startswith("| `smoke`")]
    # ...and still reads the real export: its verdict table (checked against data/) has one row per rung.
    assert refreshed == {"smoke": []}
    rows = pd.read_csv(tmp_path / "results" / "smoke" / "verdicts.csv").set_index("arm")
    assert list(rows.index) == ["no_decay", "no_decay@x2"]
    assert rows.loc["no_decay", "params_non_embedding"] == pytest.approx(106_816, rel=0.01)
    assert rows.loc["no_decay@x2", "params_non_embedding"] == pytest.approx(279_000, rel=0.01)
