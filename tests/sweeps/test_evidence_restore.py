"""A paper's committed export written back into a fresh store (sweeps/evidence/restore.py): the store then holds
what the export held, the next export is the same export, and the restored cells are not run again."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from analysis.ablation import Ablation, SvHist, assemble
from analysis.load_runs import RunStore
from analysis.results_data import exported, read_results_data, write_results_data
from analysis.store_ablation import load_ablation
from lit_modules.runs import tags
from lit_modules.runs.search import ABLATION, find_parent
from lit_modules.tracking.store import tracking_uri
from sweeps.ablate import finished_hashes
from sweeps.evidence.restore import restore_export

REPO = Path(__file__).resolve().parents[2]
CHECKS = "c" * 64
PNG = b"\x89PNG\r\n\x1a\n not a real figure, only bytes to carry"


def _part_of(paper: str, arms: list[str], folder: Path, sv_hist_arm: str | None = None) -> Ablation:
    """Some arms of a committed export (all their runs, KILLED ones too), written to `folder` with a record."""
    ab = read_results_data(REPO / "results" / paper)
    runs = ab.runs[ab.runs["arm"].isin(arms)]
    ids = set(runs["run_id"])
    finetunes = ab.finetunes[ab.finetunes[f"tags.{tags.FINETUNE_BASE}"].isin(ids)] if not ab.finetunes.empty \
        else ab.finetunes
    part = assemble(ab.parent, runs.drop(columns=["arm", "seed"]), ab.curves[ab.curves["run_id"].isin(ids)],
                    finetunes, ab.token_gaps[ab.token_gaps["arm"].isin(arms)],
                    [SvHist(sv_hist_arm, "0", "diagnostics/sv_hist_step20.png", PNG)] if sv_hist_arm else [])
    write_results_data(part, folder)
    (folder / "provenance.json").write_text(json.dumps({"checks_sha256": CHECKS, "wall_time_s": 1234.5}))
    return read_results_data(folder)


def _as_restored(store: RunStore, preset: str) -> tuple[Ablation, dict[str, str]]:
    """The store's grid as the next export reads it, and each restored run's (and fine-tune's) store id -> the
    exported run id it stands for."""
    parent = find_parent(store.client, preset, kinds=(ABLATION,))
    ab = exported(load_ablation(store, parent))
    children = store.client.search_runs([parent.info.experiment_id], max_results=10_000)
    return ab, {r.info.run_id: r.data.tags[tags.RESTORED_FROM] for r in children
                if tags.RESTORED_FROM in r.data.tags and tags.PARENT in r.data.tags}


def _comparable(frame: pd.DataFrame, ids: dict[str, str], id_columns=("run_id",)) -> pd.DataFrame:
    frame = frame.copy()
    for col in id_columns:
        frame[col] = frame[col].map(lambda v: ids.get(v, v))
    frame = frame.dropna(axis=1, how="all")  # a column only other arms' runs have
    frame = frame[sorted(frame.columns)]
    keys = [c for c in ("run_id", "key", "step") if c in frame]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_a_restored_export_is_exported_again_as_it_was(tmp_path: Path) -> None:
    """small_init's baseline and baseline+eps+gate arms (two KILLED runs among them, token-gap rows) and a
    histogram, restored into an empty store in two calls (the first export holds the baseline only): the next
    export holds the same runs under the same ids (times, params, tags, final metrics, seconds per token), the
    same curves and the same tables."""
    first = _part_of("small_init", ["baseline"], tmp_path / "first")
    want = _part_of("small_init", ["baseline", "baseline_eps_gate"], tmp_path / "export", sv_hist_arm="baseline_eps_gate")
    assert (want.runs["status"] == "KILLED").sum() == 2 and not want.token_gaps.empty and first.token_gaps.empty
    preset = want.parent.tags[tags.ABLATION_NAME]
    runs_dir = str(tmp_path / "runs")

    assert restore_export(preset, runs_dir, tmp_path / "first", CHECKS, experiment="runs").runs == len(first.runs)
    restored = restore_export(preset, runs_dir, tmp_path / "export", CHECKS, experiment="runs")
    assert (restored.runs, restored.finetunes, restored.wall_time_s) == (len(want.runs) - len(first.runs), 0, 1234.5)
    got, ids = _as_restored(RunStore(runs_dir), preset)
    assert sorted(ids.values()) == sorted(got.runs["run_id"]) == sorted(want.runs["run_id"])  # the exported ids
    got_runs, want_runs = _comparable(got.runs, {}), _comparable(want.runs, {})
    # An export from before train/loss's final value was kept has its curve only: restored, the curve's last
    # point is the run's final value too.
    implied = {f"metrics.{k}" for k in want.curves["key"]}
    assert set(got_runs.columns) - set(want_runs.columns) <= implied
    pd.testing.assert_frame_equal(got_runs[want_runs.columns], want_runs)
    assert got.runs["derived.seconds_per_token"].notna().sum() == want.runs["derived.seconds_per_token"].notna().sum() > 0
    pd.testing.assert_frame_equal(_comparable(got.curves, {}), _comparable(want.curves, {}))
    # The tables came with the second call, into the parent the first one opened.
    pd.testing.assert_frame_equal(got.token_gaps, want.token_gaps)
    assert got.sv_hists == want.sv_hists
    # Every FINISHED cell's config hash is FINISHED under the grid's parent: the ablation skips those cells.
    client = MlflowClient(tracking_uri(None, runs_dir))
    parent = find_parent(client, preset, kinds=(ABLATION,))
    finished = want.runs.loc[want.runs["status"] == "FINISHED", f"tags.{tags.CONFIG_HASH}"]
    assert finished_hashes(client, parent.info.run_id) == set(finished)
    # (A report reads nothing else of these; the slow test below compares the verdicts a restored export renders.)

    # Restoring again writes nothing: every exported run is there already.
    assert restore_export(preset, runs_dir, tmp_path / "export", CHECKS, experiment="runs") is None
    assert len(_as_restored(RunStore(runs_dir), preset)[1]) == len(want.runs)


def test_an_export_of_another_declaration_is_not_restored(tmp_path: Path) -> None:
    _part_of("wisca", ["g8_origin"], tmp_path / "export")
    runs_dir = tmp_path / "runs"
    assert restore_export("evidence/wisca", str(runs_dir), tmp_path / "export", "d" * 64) is None
    assert restore_export("evidence/wisca", str(runs_dir), tmp_path / "nothing_here", CHECKS) is None
    assert not runs_dir.exists()  # no store was even opened


def test_fine_tunes_follow_their_restored_bases_and_none_starts_from_a_restored_run(tmp_path: Path) -> None:
    """wd_plasticity's fine-tunes point at their base and the grid by run id: restored, they point at the
    restored base and parent, so the fine-tune stage finds each base's fine-tune done. A fine-tune or a scoring
    that would start from a restored run is refused in one line: no export holds its checkpoint."""
    from sweeps.finetune_stage import with_checkpoints

    want = _part_of("wd_plasticity", ["tpp20_wd0.1"], tmp_path / "export")
    assert not want.finetunes.empty
    preset = want.parent.tags[tags.ABLATION_NAME]
    runs_dir = str(tmp_path / "runs")
    restored = restore_export(preset, runs_dir, tmp_path / "export", CHECKS, experiment="runs")
    assert (restored.runs, restored.finetunes) == (len(want.runs), len(want.finetunes))
    store = RunStore(runs_dir)
    got, ids = _as_restored(store, preset)
    parent = find_parent(store.client, preset, kinds=(ABLATION,))
    finetunes = store.finetunes_of(ids)
    assert len(finetunes) == len(want.finetunes)
    for run in finetunes:
        assert run.data.tags[tags.PARENT] == run.data.tags[tags.FINETUNE_BASE] in ids
        assert run.data.tags[tags.FINETUNE_GRID_PARENT] == parent.info.run_id
    pd.testing.assert_frame_equal(_comparable(got.finetunes, {}), _comparable(want.finetunes, {}))
    jobs = [(run_id, "recipe") for run_id in ids]
    assert with_checkpoints(jobs, runs_dir, "fine-tune") == ([], len(jobs))


SMOKE = ("preset: smoke\nblocks:\n  - {arms: [baseline, no_decay], seeds: [0, 1]}\n"
         "  - {arms: [no_decay], seeds: [2], stage: below}\n")


def _smoke_call(tmp_path: Path, monkeypatch, *words: str) -> list[str]:
    from sweeps.evidence import protocol_file

    specs = tmp_path / "specs"
    specs.mkdir(exist_ok=True)
    (specs / "smoke.yaml").write_text(SMOKE)
    monkeypatch.setattr(protocol_file, "SPEC_DIR", specs)
    return ["papers=smoke", f"runs_dir={tmp_path / 'runs'}", f"results_dir={tmp_path / 'results'}",
            f"ledger={tmp_path / 'RESULTS.md'}", "trainer.max_steps=6", "workers=1", *words]


def test_export_only_with_nothing_in_the_store_is_one_sentence(tmp_path: Path, monkeypatch, capsys) -> None:
    from sweeps.evidence.driver import main

    assert main(_smoke_call(tmp_path, monkeypatch, "export_only=true")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: export_only=true:") and "nothing to export" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "results").exists() and not (tmp_path / "RESULTS.md").exists()


@pytest.mark.slow  # ~1 min: three evidence calls on a tiny protocol
def test_a_fresh_store_goes_on_from_the_committed_export(tmp_path: Path, monkeypatch) -> None:
    """Call 1 runs the headline and exports it. On a fresh machine (no store), `export_only=true` restores it
    and exports the same runs; a later call restores it again and runs only the cell it never ran."""
    from analysis.provenance import read_provenance
    from sweeps.evidence.driver import main

    argv = _smoke_call(tmp_path, monkeypatch)
    folder = tmp_path / "results" / "smoke"
    # Each call on a machine of its own: a store folder of its own (MLflow keeps a store's database open
    # within a process, so a deleted one would live on in this test's process).
    assert main([*argv, "stages=headline", f"runs_dir={tmp_path / 'runs1'}"]) == 0
    first = pd.read_csv(folder / "data" / "runs.csv")
    record = read_provenance(folder)
    verdicts = (folder / "verdicts.csv").read_bytes()

    # A record written before records named the work they cover is taken as it is, not as this call's.
    (folder / "provenance.json").write_text(json.dumps({k: v for k, v in record.items() if k != "finished_work"}))
    assert main([*argv, "export_only=true", f"runs_dir={tmp_path / 'runs2'}"]) == 0
    again = pd.read_csv(folder / "data" / "runs.csv")
    pd.testing.assert_frame_equal(again, first)  # under the same run ids
    assert read_provenance(folder) == record  # nothing ran: the record of the call that ran the cells
    assert (folder / "verdicts.csv").read_bytes() == verdicts

    runs = tmp_path / "runs3"
    assert main([*argv, "stages=headline,below", f"runs_dir={runs}"]) == 0
    client = MlflowClient(tracking_uri(None, str(runs)))
    children = [r for r in client.search_runs([e.experiment_id for e in client.search_experiments()])
                if tags.PARENT in r.data.tags]
    ran = [(r.data.tags[tags.ABLATION_ARM], r.data.tags[tags.SEED]) for r in children
           if tags.RESTORED_FROM not in r.data.tags]
    assert ran == [("no_decay", "2")]  # the headline's four cells were restored, not run again
    final = read_provenance(folder)
    assert final["wall_time_s"] > record["wall_time_s"] and final["finished_work"][0] == 5
    assert len(pd.read_csv(folder / "data" / "runs.csv")) == 5
